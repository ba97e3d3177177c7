#include "kernels/cpu/int8_gemm.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <utility>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "core/check.h"
#include "core/parallel.h"

namespace trident::kernels::cpu {

// Note [Int8 packed weights]
// Why this layout? vpdpbusd multiplies 4 adjacent bytes of one operand by 4 of the other and
// adds the 4 products into one int32 lane. With the weight laid out as
//   [block of 16 channels][group of 4 inputs][16 channels][4 inputs]
// one 64-byte load holds 4 inputs of 16 channels, and the activation's 4 bytes of that group,
// broadcast to every lane, give 16 channels' partial sums in one instruction: no horizontal
// sums at the end, and each row of a decode step's few rows reuses the loaded weights from a
// register. A block's bytes are contiguous, so a decode step reads the weight as a few
// sequential streams, each byte once. This is the layout oneDNN calls BA16a16b4a (where the
// inputs are a multiple of 16) and llama.cpp's repacked Q8_0 blocks resemble.
//
// Note [Int8 signs]
// vpdpbusd multiplies unsigned by signed bytes. The activation is shifted to unsigned
// (a + 128, an xor of the sign bit) and the sum corrected by 128 x the channel's column sum,
// computed once at packing: sum (a + 128) w = sum a w + 128 sum w, exact in int32 while
// K x 255 x 127 < 2^31. The AVX2 path has no vpdpbusd: vpmaddubsw adds two u8 x s8 products
// into an int16 and saturates, which 2 x 255 x 127 would; there |a| x (w with a's sign) is
// used instead (vpsignb), whose pairs stay within 2 x 127 x 127 = 32,258. Both need codes in
// [-127, 127]: |-128| is not a byte, and the packing refuses -128 in the weight.

namespace {

constexpr int64_t kBlock = 16;                    // channels per block
constexpr int64_t kGroup = 4;                     // inputs per group
constexpr int64_t kBlockGroupBytes = kBlock * kGroup;
constexpr int64_t kPanelRows = 256;               // rows of A per panel (kept in L2 across blocks)

template <class T>
DataPtr allocate_zeroed(int64_t count, MemoryCategory category) {
  const size_t bytes = static_cast<size_t>(std::max<int64_t>(count, 1)) * sizeof(T);
  DataPtr p = host_allocator().allocate(bytes, category);
  std::memset(p.get(), 0, bytes);
  return p;
}

// What a tile needs after its sums: the scales, the correction, where C is.
struct Epilogue {
  const float* a_scale;
  const int32_t* compensation;  // null for the path that does not shift A (AVX2)
  const float* w_scale;
  const float* bias;  // may be null
  float* C;
  int64_t ldc, N;
};

// The scalar epilogue of one output: every path computes this expression (see int8_isa.h).
inline float scaled(int32_t sum, float a_scale, float w_scale, const float* bias, int64_t n) {
  const float s = a_scale * w_scale;
  return bias != nullptr ? std::fma(static_cast<float>(sum), s, bias[n]) : static_cast<float>(sum) * s;
}

// ---- scalar: the reference path, reading A and the packed weight as they are ----
void gemm_scalar(int64_t m0, int64_t m1, int64_t b0, int64_t b1, const int8_t* A, int64_t lda,
                 const Int8PackedWeights& w, const Epilogue& e) {
  const int64_t K = w.K(), groups = w.k_groups();
  for (int64_t m = m0; m < m1; ++m)
    for (int64_t n = b0 * kBlock; n < std::min(b1 * kBlock, e.N); ++n) {
      const int8_t* wb = w.data() + (n / kBlock) * groups * kBlockGroupBytes + (n % kBlock) * kGroup;
      int32_t sum = 0;
      for (int64_t k = 0; k < K; ++k)
        sum += int32_t{A[m * lda + k]} * int32_t{wb[(k / kGroup) * kBlockGroupBytes + k % kGroup]};
      e.C[m * e.ldc + n] = scaled(sum, e.a_scale[m], e.w_scale[n], e.bias, n);
    }
}

#if defined(__x86_64__)
// GCC 12's AVX-512 headers seed masked intrinsics with _mm512_undefined_*(), which
// -W(maybe-)uninitialized reports once inlined (a false positive, as in adamw.cc).
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#define TRI_INT8_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
#define TRI_INT8_AVXVNNI __attribute__((target("avx2,fma,avxvnni")))
#define TRI_INT8_AVX2 __attribute__((target("avx2,fma")))

inline int32_t load_group(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Note [GCC and the int8 tiles' accumulators]
// Why is int8_gemm.cc compiled with -fno-tree-ch (src/CMakeLists.txt)? GCC 12's loop-header
// copying leaves the 8 x 3 tile's 24 accumulators in one set of registers at the loop's entry
// and another inside it, and copies all of them every iteration (objdump: 51 vmovdqa per 24
// vpdpbusd). Without it the loop is the 24 vpdpbusd, 3 loads and 8 broadcasts it should be: the
// tile alone ran at 176-179 GOP/s instead of 101-107 on one Emerald Rapids core (clang 14:
// 141-267, the machine was shared). Inline assembly for vpdpbusd was worse: GCC then kept the
// accumulators in memory.

// ---- AVX-512 VNNI: MR rows x NB blocks of 16 channels, all in registers ----
template <int MR, int NB>
TRI_INT8_AVX512 void tile_avx512(const uint8_t* a, int64_t lda, int64_t groups, const int8_t* w, int64_t m0,
                                 int64_t b0, const Epilogue& e) {
  __m512i acc[MR][NB];
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < NB; ++j) acc[r][j] = _mm512_setzero_si512();
  const int64_t block_bytes = groups * kBlockGroupBytes;
  for (int64_t g = 0; g < groups; ++g) {
    __m512i wv[NB];
    for (int j = 0; j < NB; ++j) wv[j] = _mm512_loadu_si512(w + j * block_bytes + g * kBlockGroupBytes);
    for (int r = 0; r < MR; ++r) {
      const __m512i av = _mm512_set1_epi32(load_group(a + r * lda + g * kGroup));
      for (int j = 0; j < NB; ++j) acc[r][j] = _mm512_dpbusd_epi32(acc[r][j], av, wv[j]);
    }
  }
  for (int j = 0; j < NB; ++j) {
    const int64_t n = (b0 + j) * kBlock;
    const __mmask16 mask = e.N - n >= kBlock ? __mmask16(0xffff) : __mmask16((1u << (e.N - n)) - 1);
    const __m512i comp = _mm512_loadu_si512(e.compensation + n);
    const __m512 ws = _mm512_loadu_ps(e.w_scale + n);
    const __m512 bias = e.bias != nullptr ? _mm512_maskz_loadu_ps(mask, e.bias + n) : _mm512_setzero_ps();
    for (int r = 0; r < MR; ++r) {
      const __m512 sum = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[r][j], comp));
      const __m512 s = _mm512_mul_ps(_mm512_set1_ps(e.a_scale[m0 + r]), ws);
      const __m512 out = e.bias != nullptr ? _mm512_fmadd_ps(sum, s, bias) : _mm512_mul_ps(sum, s);
      _mm512_mask_storeu_ps(e.C + (m0 + r) * e.ldc + n, mask, out);
    }
  }
}

// The 256-bit paths' epilogue for 8 channels from n: the tail through the scalar expression.
TRI_INT8_AVX2 inline void store8(__m256i acc, int64_t m, int64_t n, const Epilogue& e) {
  if (e.compensation != nullptr)
    acc = _mm256_sub_epi32(acc, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(e.compensation + n)));
  if (e.N - n >= 8) {
    const __m256 sum = _mm256_cvtepi32_ps(acc);
    const __m256 s = _mm256_mul_ps(_mm256_set1_ps(e.a_scale[m]), _mm256_loadu_ps(e.w_scale + n));
    const __m256 out =
        e.bias != nullptr ? _mm256_fmadd_ps(sum, s, _mm256_loadu_ps(e.bias + n)) : _mm256_mul_ps(sum, s);
    _mm256_storeu_ps(e.C + m * e.ldc + n, out);
    return;
  }
  alignas(32) int32_t sums[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(sums), acc);
  for (int64_t i = 0; n + i < e.N; ++i)
    e.C[m * e.ldc + n + i] = scaled(sums[i], e.a_scale[m], e.w_scale[n + i], e.bias, n + i);
}

// A 256-bit tile's MR rows of one block: channels 0-7 of the block in lo, 8-15 in hi.
template <int MR>
TRI_INT8_AVX2 inline void store_rows(const __m256i (&lo)[MR], const __m256i (&hi)[MR], int64_t m0, int64_t b0,
                                     const Epilogue& e) {
  for (int r = 0; r < MR; ++r) {
    store8(lo[r], m0 + r, b0 * kBlock, e);
    if (e.N - b0 * kBlock > 8) store8(hi[r], m0 + r, b0 * kBlock + 8, e);
  }
}

// The two 256-bit halves (channels 0-7, 8-15) of a block's group g.
TRI_INT8_AVX2 inline void load_halves(const int8_t* w, int64_t g, __m256i& lo, __m256i& hi) {
  const int8_t* p = w + g * kBlockGroupBytes;
  lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32));
}

// ---- AVX-VNNI: MR rows x one block (two halves of 8 channels); 16 vector registers ----
template <int MR, int NB>
TRI_INT8_AVXVNNI void tile_avxvnni(const uint8_t* a, int64_t lda, int64_t groups, const int8_t* w, int64_t m0,
                                   int64_t b0, const Epilogue& e) {
  static_assert(NB == 1, "AVX-VNNI tiles are one block wide");
  __m256i lo[MR], hi[MR];
  for (int r = 0; r < MR; ++r) lo[r] = hi[r] = _mm256_setzero_si256();
  for (int64_t g = 0; g < groups; ++g) {
    __m256i wl, wh;
    load_halves(w, g, wl, wh);
    for (int r = 0; r < MR; ++r) {
      const __m256i av = _mm256_set1_epi32(load_group(a + r * lda + g * kGroup));
      lo[r] = _mm256_dpbusd_avx_epi32(lo[r], av, wl);
      hi[r] = _mm256_dpbusd_avx_epi32(hi[r], av, wh);
    }
  }
  store_rows<MR>(lo, hi, m0, b0, e);
}

// ---- AVX2: |a| x sign(w, a) by vpmaddubsw, widened by vpmaddwd (Note [Int8 signs]) ----
template <int MR, int NB>
TRI_INT8_AVX2 void tile_avx2(const uint8_t* a, int64_t lda, int64_t groups, const int8_t* w, int64_t m0, int64_t b0,
                             const Epilogue& e) {
  static_assert(NB == 1, "AVX2 tiles are one block wide");
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i lo[MR], hi[MR];
  for (int r = 0; r < MR; ++r) lo[r] = hi[r] = _mm256_setzero_si256();
  for (int64_t g = 0; g < groups; ++g) {
    __m256i wl, wh;
    load_halves(w, g, wl, wh);
    for (int r = 0; r < MR; ++r) {
      const __m256i av = _mm256_set1_epi32(load_group(a + r * lda + g * kGroup));
      const __m256i abs_a = _mm256_sign_epi8(av, av);
      lo[r] = _mm256_add_epi32(lo[r], _mm256_madd_epi16(_mm256_maddubs_epi16(abs_a, _mm256_sign_epi8(wl, av)), ones));
      hi[r] = _mm256_add_epi32(hi[r], _mm256_madd_epi16(_mm256_maddubs_epi16(abs_a, _mm256_sign_epi8(wh, av)), ones));
    }
  }
  store_rows<MR>(lo, hi, m0, b0, e);
}

using TileFn = void (*)(const uint8_t*, int64_t, int64_t, const int8_t*, int64_t, int64_t, const Epilogue&);

// A path's tiles of 1..MR rows x 1..NB blocks, instantiated at compile time.
template <int MR, int NB>
struct Avx512Tile {
  static constexpr TileFn fn = &tile_avx512<MR, NB>;
};
template <int MR, int NB>
struct AvxVnniTile {
  static constexpr TileFn fn = &tile_avxvnni<MR, NB>;
};
template <int MR, int NB>
struct Avx2Tile {
  static constexpr TileFn fn = &tile_avx2<MR, NB>;
};

template <template <int, int> class Tile, int MR, int NB, size_t... I>
constexpr std::array<TileFn, MR * NB> tile_table(std::index_sequence<I...>) {
  return {Tile<static_cast<int>(I / NB) + 1, static_cast<int>(I % NB) + 1>::fn...};
}

// A path's tile shape and its tiles (index (rows - 1) * NB + blocks - 1).
struct Path {
  int MR, NB;
  const TileFn* tiles;
  bool shift_a;  // A as a + 128 (vpdpbusd) or as signed bytes (AVX2)
};

// Note [Int8 tile shapes]
// AVX-512 has 32 vector registers: 8 rows x 3 blocks is 24 accumulators, 3 weight vectors and a
// broadcast, so a decode step of up to 8 rows reads each weight byte once. The 256-bit paths
// have 16 registers (AVX-VNNI is VEX-encoded, without AVX-512's upper 16): 6 rows x 2 halves
// of a block, and 4 rows on AVX2, whose products need two more temporaries per row.
// The tiles are templates on their rows and blocks (the one use of templates here beyond
// dtypes): accumulators stay in registers only when every index is a compile-time constant.
constexpr int kAvx512Rows = 8, kAvx512Blocks = 3, kAvxVnniRows = 6, kAvx2Rows = 4;
constexpr auto kAvx512Tiles =
    tile_table<Avx512Tile, kAvx512Rows, kAvx512Blocks>(std::make_index_sequence<kAvx512Rows * kAvx512Blocks>());
constexpr auto kAvxVnniTiles = tile_table<AvxVnniTile, kAvxVnniRows, 1>(std::make_index_sequence<kAvxVnniRows>());
constexpr auto kAvx2Tiles = tile_table<Avx2Tile, kAvx2Rows, 1>(std::make_index_sequence<kAvx2Rows>());

Path path_of(Int8Isa isa) {
  switch (isa) {
    case Int8Isa::kAvx512Vnni: return {kAvx512Rows, kAvx512Blocks, kAvx512Tiles.data(), true};
    case Int8Isa::kAvxVnni: return {kAvxVnniRows, 1, kAvxVnniTiles.data(), true};
    case Int8Isa::kAvx2: return {kAvx2Rows, 1, kAvx2Tiles.data(), false};
    default: TRI_ASSERT(false, "no vector path for ", int8_isa_name(isa));
  }
  return {};
}
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

}  // namespace

Int8PackedWeights::Int8PackedWeights(const int8_t* W, int64_t N, int64_t K, int64_t ldw, const float* scale)
    : N_(N), K_(K) {
  TRI_CHECK(N >= 0 && K >= 0 && ldw >= K, "Int8PackedWeights: N=", N, " K=", K, " ldw=", ldw,
            " (need N, K >= 0 and ldw >= K)");
  TRI_CHECK(K <= kInt8GemmMaxK, "Int8PackedWeights: K=", K, " inputs per channel; int32 sums hold at most ", kInt8GemmMaxK,
            " (Note [Int8 signs])");
  const int64_t padded_n = n_blocks() * kBlock, groups = k_groups();
  data_ = allocate_zeroed<int8_t>(padded_n * groups * kGroup, MemoryCategory::kParameter);
  compensation_ = allocate_zeroed<int32_t>(padded_n, MemoryCategory::kParameter);
  scales_ = allocate_zeroed<float>(padded_n, MemoryCategory::kParameter);
  auto* packed = static_cast<int8_t*>(data_.get());
  auto* comp = static_cast<int32_t*>(compensation_.get());
  auto* scales = static_cast<float*>(scales_.get());
  for (int64_t n = 0; n < N; ++n) {
    int32_t sum = 0;
    int8_t* block = packed + (n / kBlock) * groups * kBlockGroupBytes + (n % kBlock) * kGroup;
    for (int64_t k = 0; k < K; ++k) {
      const int8_t v = W[n * ldw + k];
      TRI_CHECK(v != -128, "Int8PackedWeights: weight code -128 at channel ", n, ", input ", k,
                "; int8 codes must lie in [-127, 127] (Note [Int8 signs])");
      block[(k / kGroup) * kBlockGroupBytes + k % kGroup] = v;
      sum += v;
    }
    comp[n] = 128 * sum;
    scales[n] = scale[n];
  }
}

int8_t Int8PackedWeights::at(int64_t n, int64_t k) const {
  TRI_CHECK_INDEX(n >= 0 && n < N_ && k >= 0 && k < K_, "Int8PackedWeights::at(", n, ", ", k, ") outside (", N_,
                  ", ", K_, ")");
  return data()[(n / kBlock) * k_groups() * kBlockGroupBytes + (k / kGroup) * kBlockGroupBytes + (n % kBlock) * kGroup +
                k % kGroup];
}

void Int8PackedWeights::row(int64_t n, int8_t* out) const {
  TRI_CHECK_INDEX(n >= 0 && n < N_, "Int8PackedWeights::row(", n, ") outside ", N_, " rows");
  const int8_t* block = data() + (n / kBlock) * k_groups() * kBlockGroupBytes + (n % kBlock) * kGroup;
  for (int64_t k = 0; k < K_; ++k) out[k] = block[(k / kGroup) * kBlockGroupBytes + k % kGroup];
}

int64_t Int8PackedWeights::nbytes() const {
  return static_cast<int64_t>(data_.nbytes() + compensation_.nbytes() + scales_.nbytes());
}

void int8_gemm_epilogue(int64_t M, int64_t N, const float* a_scale, const float* w_scale, const float* bias, float* C,
                        int64_t ldc) {
  constexpr int64_t kParallelOutputs = int64_t{1} << 16;
  parallel_for(0, M, M * N >= kParallelOutputs ? 1 : M, [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m) {
      float* c = C + m * ldc;
      const float a = a_scale[m];
      if (bias != nullptr) {
        for (int64_t n = 0; n < N; ++n) c[n] = std::fma(c[n], a * w_scale[n], bias[n]);
      } else {
        for (int64_t n = 0; n < N; ++n) c[n] = c[n] * (a * w_scale[n]);
      }
    }
  });
}

void int8_gemm(int64_t M, const int8_t* A, int64_t lda, const float* a_scale, const Int8PackedWeights& w,
               const float* bias, float* C, int64_t ldc, Int8Isa isa) {
  const int64_t N = w.N(), K = w.K();
  TRI_CHECK(M >= 0 && lda >= K && ldc >= N, "int8_gemm: M=", M, " lda=", lda, " ldc=", ldc, " for a weight of (", N,
            ", ", K, ") (need M >= 0, lda >= K, ldc >= N)");
  isa = int8_isa_resolve(isa);
  if (M == 0 || N == 0) return;
  const Epilogue scalar_epilogue{a_scale, nullptr, w.scales(), bias, C, ldc, N};
  // Products under this many multiply-adds run on the calling thread: a parallel region
  // costs microseconds.
  constexpr int64_t kParallelWork = int64_t{1} << 18;
  const int64_t blocks = w.n_blocks();
  const bool parallel = M * N * K >= kParallelWork;
  if (isa == Int8Isa::kScalar) {
    parallel_for(0, blocks, parallel ? 1 : blocks, [&](int64_t b0, int64_t b1) {
      gemm_scalar(0, M, b0, b1, A, lda, w, scalar_epilogue);
    });
    return;
  }
#if defined(__x86_64__)
  const Path path = path_of(isa);
  // A's rows padded to whole groups (zeros), shifted to unsigned for vpdpbusd: once per call.
  const int64_t groups = w.k_groups(), a_stride = groups * kGroup;
  DataPtr a_buffer = host_allocator().allocate(static_cast<size_t>(M * a_stride), MemoryCategory::kActivation);
  auto* a = static_cast<uint8_t*>(a_buffer.get());
  const uint8_t shift = path.shift_a ? 0x80 : 0x00;
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t k = 0; k < K; ++k) a[m * a_stride + k] = static_cast<uint8_t>(A[m * lda + k]) ^ shift;
    for (int64_t k = K; k < a_stride; ++k) a[m * a_stride + k] = shift;
  }
  // The unshifted path (AVX2) subtracts no correction.
  const Epilogue e{a_scale, path.shift_a ? w.compensation() : nullptr, w.scales(), bias, C, ldc, N};
  // Tasks: panels of kPanelRows rows (A's panel stays in L2 while every block column passes)
  // x columns of NB blocks, panel-major; see Note [Int8 tile shapes].
  const int64_t columns = (blocks + path.NB - 1) / path.NB, panels = (M + kPanelRows - 1) / kPanelRows;
  const int64_t block_bytes = groups * kBlockGroupBytes;
  parallel_for(0, panels * columns, parallel ? 1 : panels * columns, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t panel = t / columns, b0 = (t % columns) * path.NB;
      const int nb = static_cast<int>(std::min<int64_t>(path.NB, blocks - b0));
      const int64_t m_end = std::min(M, (panel + 1) * kPanelRows);
      for (int64_t m0 = panel * kPanelRows; m0 < m_end; m0 += path.MR) {
        const int mr = static_cast<int>(std::min<int64_t>(path.MR, m_end - m0));
        path.tiles[(mr - 1) * path.NB + nb - 1](a + m0 * a_stride, a_stride, groups, w.data() + b0 * block_bytes, m0,
                                                b0, e);
      }
    }
  });
#else
  TRI_ASSERT(false, "no vector int8 path on this architecture");
#endif
}

}  // namespace trident::kernels::cpu
