#include "kernels/cpu/ggml_block_gemm.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "core/check.h"
#include "core/half.h"
#include "core/parallel.h"
#include "kernels/cpu/x86_kernel_targets.h"

namespace trident::kernels::cpu {

// Note [Integer GEMM at prefill]
// Why not dequantize and call the fp32 GEMM? Prefill multiplies each weight by M = 128 (one
// prompt) to 1024 (eight) rows of x, so its time is arithmetic, not the weight's bytes: the tiled
// path (quantization/quantized_matmul.h) spends the fp32 GEMM's time plus the dequantization,
// 2-3x fp32 prefill on Zen 5. An int8 multiply-add is four times as dense as an fp32 one
// (vpdpbusd: 64 byte products summed by fours into 16 int32 lanes), so with x quantized to Q8_0
// blocks (as decode does, Note [Integer dot products at decode]) the product is llama.cpp's
// arithmetic at a quarter of the instructions.
//
// The layout: vpdpbusd with one operand broadcast (4 bytes of x's row m) and the other 16 weight
// rows' 4 codes of the same 4 inputs sums 16 output columns at once, with no horizontal sums. The
// weight is held in that layout (Note [Sixteen rows a panel] in ggml_panels.cc); a product widens
// a panel of 16 weight rows at a time into a buffer: per block b, per group g of 4 inputs, one
// 64-byte vector of [row 0's codes 4g..4g+3, row 1's, ..., row 15's] (Q4_0's nibbles to bytes,
// Q8_0's codes made unsigned), and the 16 rows' block scales as fp32. A thread widens kPanels
// panels (32 output columns) once and runs every row of x against them, kRows rows of x at a time (4 x 2 int32 sums + 4 x 2 fp32 sums in registers).
// A block's int32 sums start at x's correction (AVX-512: the weight codes made unsigned, as at
// decode) and, after the 8 groups, are converted and multiply-added, scaled by d_w d_x, into the
// fp32 sums: the same block-order sum decode computes, so the paths differ in rounding only.
// Threads take whole panel groups (output columns), so the thread count changes no bit.
//
// AVX2 has no vpdpbusd: vpmaddubsw's pairs of u8 x s8 products must fit int16, so it multiplies
// |w| by x signed as w (llama.cpp's trick; 2 x 127 x 127 fits) and widens by vpmaddwd, on 8
// columns (half a panel) at a time, from a panel of signed codes (widened in plain C++). The
// scalar path reads the weight's panels as they are.
//
// Measured on 2 Zen 5 cores (a shared machine): 400-620 G int8 multiply-adds x 2 per second at
// GPT-2's shapes with 128 rows, and prompt-128 TTFT 4-5.6x the tiled path's, below fp32's
// (bench/results/2026-11-29-prefill-int8-zen5). x's quantization is vectorized (Note [Q8_0
// activations in vectors] in ggml_blocks.cc); it was ggml's scalar reference, 5-25% of a
// product's time at 128 rows. Measured 2026-11-30 (quantized_matvec_bench --M 1024 --hot 1, 2
// Zen 5 cores): 450-500 G multiply-adds/s, ~2.8x the fp32 GEMM, about 58% of vpdpbusd's
// measured peak; 4, 6 or 8 rows per tile made no difference.
// x's block scales and corrections are read compact (GgmlQ8Activations::block_scales); they
// were copied out of lane arrays decode's old kernel read, by one thread per product (Note
// [Sixteen blocks at a time] in ggml_blocks.cc has the measurements).
// The kernel's ceiling: per block and 16 outputs of a row, 8 vpdpbusd and an epilogue of a
// convert, a multiply (d_w d_x) and a multiply-add; if they share vpdpbusd's two pipes on Zen 5
// (inferred: the tile without the multiply ran 8-10% faster; no counters in the VM), at most
// 8 / 11 = 73% of the vpdpbusd peak (840 G multiply-adds/s on 2 cores, measured by a
// register-only loop 2026-11-30); the register tile alone (a one-off program) ran at 540-614,
// 64-73%, and this kernel in place at 560-590 in a quiet phase of the machine.

namespace {

constexpr int64_t kPanelRows = 16;  // weight rows per panel: one zmm of int32 sums
constexpr int64_t kPanels = 2;  // panels per thread's step: 32 output columns
constexpr int64_t kBlockBytes = 8 * 64;  // a panel's block: 8 groups x 16 rows x 4 codes
constexpr int kRows = 4;       // rows of x per register tile (4 x 2 zmm sums of each kind)

// A 64-byte-aligned buffer for one thread's panels.
struct AlignedBytes {
  explicit AlignedBytes(size_t n)
      : p(static_cast<uint8_t*>(::operator new(n, std::align_val_t{64}))) {}
  ~AlignedBytes() { ::operator delete(p, std::align_val_t{64}); }
  AlignedBytes(const AlignedBytes&) = delete;
  AlignedBytes& operator=(const AlignedBytes&) = delete;
  uint8_t* p;
};

// Panel p of the weight as the AVX2 path's panel: codes (nb x kBlockBytes, one signed byte per
// code, group g of 4 inputs at g * 64) and scales (nb x 16 fp32); the weight's padding rows are
// zero codes and zero scales already.
void widen_panel(const GgmlPanels& w, int64_t p, uint8_t* pc, float* pd) {
  const int64_t nb = w.blocks();
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* out = pc + b * kBlockBytes;
    const uint8_t* in = w.block_codes(p, b);
    const uint16_t* d = w.block_scales(p, b);
    if (w.type == GgmlBlockType::kQ8_0) {
      std::memcpy(out, in, kBlockBytes);
    } else {
      for (int64_t g = 0; g < 4; ++g)
        for (int64_t k = 0; k < 64; ++k) {
          const uint8_t v = in[g * 64 + k];
          out[g * 64 + k] = static_cast<uint8_t>((v & 15) - 8);
          out[(g + 4) * 64 + k] = static_cast<uint8_t>((v >> 4) - 8);
        }
    }
    for (int64_t i = 0; i < kPanelRows; ++i) pd[b * kPanelRows + i] = f16::to_float(d[i]);
  }
}

// The reference: each output's block sums in block order, from the weight's panels as they are.
void columns_scalar(const GgmlQ8Activations& x, const GgmlPanels& w, int64_t r0, int64_t r1, float* y,
                    int64_t ldy, const float* bias) {
  const int64_t nb = x.blocks();
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t m = 0; m < x.M(); ++m) {
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        const int8_t* xq = x.codes(m) + b * kGgmlBlock;
        int32_t s = 0;
        for (int64_t j = 0; j < kGgmlBlock; ++j) s += w.code(r, b, j) * int32_t{xq[j]};
        acc += static_cast<float>(s) * (f16::to_float(w.scale(r, b)) * x.scale(m, b));
      }
      y[m * ldy + r] = bias == nullptr ? acc : acc + bias[r];
    }
}

// What a register tile reads: kPanels panels (codes every `code_stride` bytes, scales every
// `d_stride` floats) and the rows of x from m0.
struct Tile {
  const uint8_t* pc;
  const float* pd;
  int64_t code_stride, d_stride, nb;
  const GgmlQ8Activations* x;
  const float* bias;  // at y's column 0, added as the sums are stored; nullptr: none
};

#if defined(__x86_64__)
TRI_X86_INTRINSICS_BEGIN

// MR rows of x from m0 against NV panels; `cols` valid output columns from y's column 0.
template <int MR, int NV>
TRI_AVX512 void tile_avx512(const Tile& t, int64_t m0, int64_t cols, float* y, int64_t ldy) {
  const int64_t nb = t.nb;
  const int8_t* xc[MR];
  const float* xd[MR];
  const int32_t* xcorr[MR];
  for (int m = 0; m < MR; ++m) {
    xc[m] = t.x->codes(m0 + m);
    xd[m] = t.x->block_scales(m0 + m);
    xcorr[m] = t.x->block_corrections(m0 + m);
  }
  __m512 acc[MR][NV];
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[m][v] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m512i s[MR][NV];
#pragma GCC unroll 8
    for (int m = 0; m < MR; ++m) {
      const __m512i c = _mm512_set1_epi32(xcorr[m][b]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) s[m][v] = c;
    }
    const uint8_t* wb = t.pc + b * kBlockBytes;
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) {
      __m512i w[NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) w[v] = _mm512_load_si512(wb + v * t.code_stride + g * 64);
#pragma GCC unroll 8
      for (int m = 0; m < MR; ++m) {
        const __m512i a = _mm512_set1_epi32(ggml_four_codes(xc[m] + b * kGgmlBlock + 4 * g));
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) s[m][v] = _mm512_dpbusd_epi32(s[m][v], w[v], a);
      }
    }
    __m512 dw[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) dw[v] = _mm512_load_ps(t.pd + v * t.d_stride + b * kPanelRows);
#pragma GCC unroll 8
    for (int m = 0; m < MR; ++m) {
      const __m512 dx = _mm512_set1_ps(xd[m][b]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v)
        acc[m][v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[m][v]), _mm512_mul_ps(dw[v], dx), acc[m][v]);
    }
  }
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) {
    const int64_t n = std::clamp<int64_t>(cols - v * kPanelRows, 0, kPanelRows);
    const __mmask16 mask = static_cast<__mmask16>((1u << n) - 1);
    if (t.bias != nullptr) {
      const __m512 b = _mm512_maskz_loadu_ps(mask, t.bias + v * kPanelRows);
#pragma GCC unroll 8
      for (int m = 0; m < MR; ++m) acc[m][v] = _mm512_add_ps(acc[m][v], b);
    }
#pragma GCC unroll 8
    for (int m = 0; m < MR; ++m) _mm512_mask_storeu_ps(y + (m0 + m) * ldy + v * kPanelRows, mask, acc[m][v]);
  }
}

// Panel p of the weight as the AVX-512 path's panel (unsigned codes: Q8_0's with 0x80 flipped,
// Q4_0's nibbles, low ones group g and high ones group g + 4 of vector g). The weight is held
// transposed already (Note [Sixteen rows a panel] in ggml_panels.cc; this was a transpose of
// loads and shuffles from ggml's rows, ~40% of a Q8_0 product at 128 rows when it gathered).
TRI_AVX512 void widen_panel_avx512(const GgmlPanels& w, int64_t p, uint8_t* pc, float* pd) {
  const int64_t nb = w.blocks();
  const __m512i low = _mm512_set1_epi8(15), flip = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* out = pc + b * kBlockBytes;
    const uint8_t* in = w.block_codes(p, b);
    if (w.type == GgmlBlockType::kQ8_0) {
      for (int g = 0; g < 8; ++g)
        _mm512_store_si512(out + g * 64, _mm512_xor_si512(_mm512_loadu_si512(in + g * 64), flip));
    } else {
      for (int g = 0; g < 4; ++g) {
        const __m512i v = _mm512_loadu_si512(in + g * 64);
        _mm512_store_si512(out + g * 64, _mm512_and_si512(v, low));
        _mm512_store_si512(out + (g + 4) * 64, _mm512_and_si512(_mm512_srli_epi16(v, 4), low));
      }
    }
    _mm512_store_ps(pd + b * kPanelRows,
                    _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.block_scales(p, b)))));
  }
}

TRI_AVX2 inline __m256 zero_avx2() { return _mm256_setzero_ps(); }

// MR rows of x from m0 against half h of a panel (8 columns; `cols` of them valid), signed codes.
template <int MR>
TRI_AVX2 void tile_avx2(const Tile& t, int64_t h, int64_t m0, int64_t cols, float* y, int64_t ldy) {
  const int64_t nb = t.nb;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[MR];
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m) acc[m] = zero_avx2();
  for (int64_t b = 0; b < nb; ++b) {
    __m256i s[MR];
#pragma GCC unroll 8
    for (int m = 0; m < MR; ++m) s[m] = _mm256_setzero_si256();
    const uint8_t* wb = t.pc + b * kBlockBytes + h * 32;
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) {
      const __m256i w = _mm256_load_si256(reinterpret_cast<const __m256i*>(wb + g * 64));
      const __m256i aw = _mm256_abs_epi8(w);
#pragma GCC unroll 8
      for (int m = 0; m < MR; ++m) {
        const __m256i a = _mm256_set1_epi32(ggml_four_codes(t.x->codes(m0 + m) + b * kGgmlBlock + 4 * g));
        const __m256i pairs = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(a, w));
        s[m] = _mm256_add_epi32(s[m], _mm256_madd_epi16(pairs, ones));
      }
    }
    const __m256 dw = _mm256_load_ps(t.pd + b * kPanelRows + h * 8);
#pragma GCC unroll 8
    for (int m = 0; m < MR; ++m) {
      const __m256 dx = _mm256_set1_ps(t.x->scale(m0 + m, b));
      acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[m]), _mm256_mul_ps(dw, dx), acc[m]);
    }
  }
  const int64_t n = std::clamp<int64_t>(cols, 0, 8);
  alignas(32) float out[8];
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m) {
    _mm256_store_ps(out, acc[m]);
    if (t.bias != nullptr)
      for (int64_t j = 0; j < n; ++j) out[j] += t.bias[j];
    std::copy_n(out, n, y + (m0 + m) * ldy);
  }
}
TRI_X86_INTRINSICS_END
#endif

using TileFn = void (*)(const Tile&, int64_t, int64_t, float*, int64_t);

// The AVX-512 tiles of (rows of x, panels), from tables of the template's instances.
template <int NV, int... Ms>
constexpr std::array<TileFn, sizeof...(Ms)> avx512_tiles(std::integer_sequence<int, Ms...>) {
#if defined(__x86_64__)
  return {&tile_avx512<Ms + 1, NV>...};
#else
  return {};
#endif
}

template <int... Vs>
TileFn pick_avx512(int64_t mr, int64_t nv, std::integer_sequence<int, Vs...>) {
  static constexpr std::array<std::array<TileFn, kRows>, sizeof...(Vs)> table = {
      avx512_tiles<Vs + 1>(std::make_integer_sequence<int, kRows>())...};
  return table[static_cast<size_t>(nv - 1)][static_cast<size_t>(mr - 1)];
}

using Avx2Fn = void (*)(const Tile&, int64_t, int64_t, int64_t, float*, int64_t);

template <int... Ms>
Avx2Fn pick_avx2(int64_t mr, std::integer_sequence<int, Ms...>) {
#if defined(__x86_64__)
  static constexpr Avx2Fn fns[] = {&tile_avx2<Ms + 1>...};
  return fns[mr - 1];
#else
  (void)mr;
  return nullptr;
#endif
}

// Output columns [c0, c1) (c0 a multiple of kPanels x 16, c1 - c0 <= that) by the panel paths.
void columns_panels(MatvecIsa isa, const GgmlQ8Activations& x, const GgmlPanels& w, int64_t c0, int64_t c1,
                    uint8_t* pc, float* pd, float* y, int64_t ldy, const float* bias) {
  const int64_t nb = x.blocks(), M = x.M();
  const int64_t panels = (c1 - c0 + kPanelRows - 1) / kPanelRows;
  const Tile tile{pc, pd, nb * kBlockBytes, nb * kPanelRows, nb, &x, bias == nullptr ? nullptr : bias + c0};
  const auto tiles = std::make_integer_sequence<int, kRows>();
  for (int64_t p = 0; p < panels; ++p) {
    const int64_t wp = c0 / kPanelRows + p;
#if defined(__x86_64__)
    if (isa == MatvecIsa::kAvx512) {
      widen_panel_avx512(w, wp, pc + p * tile.code_stride, pd + p * tile.d_stride);
      continue;
    }
#endif
    widen_panel(w, wp, pc + p * tile.code_stride, pd + p * tile.d_stride);
  }
  for (int64_t m0 = 0; m0 < M; m0 += kRows) {
    const int64_t mr = std::min<int64_t>(kRows, M - m0);
    if (isa == MatvecIsa::kAvx512) {
      pick_avx512(mr, panels, std::make_integer_sequence<int, kPanels>())(tile, m0, c1 - c0, y + c0, ldy);
    } else {
      const Avx2Fn fn = pick_avx2(mr, tiles);
      for (int64_t h = 0; h < 2 * panels; ++h) {
        const Tile half{pc + (h / 2) * tile.code_stride, pd + (h / 2) * tile.d_stride, 0, 0, nb, &x,
                        tile.bias == nullptr ? nullptr : tile.bias + h * 8};
        fn(half, h % 2, m0, c1 - c0 - h * 8, y + c0 + h * 8, ldy);
      }
    }
  }
}

}  // namespace

void ggml_block_gemm(MatvecIsa isa, const GgmlQ8Activations& x, const GgmlPanels& w, float* y, int64_t ldy,
                     const float* bias) {
  TRI_CHECK(x.weight_type() == w.type, "ggml_block_gemm: activations prepared for ",
            ggml_block_type_name(x.weight_type()), " weights, given ", ggml_block_type_name(w.type));
  TRI_CHECK(x.cols() == w.cols, "ggml_block_gemm: x has ", x.cols(), " columns, the weight ", w.cols);
  TRI_CHECK(ggml_matvec_supports(isa), "ggml_block_gemm: this CPU has no ", matvec_isa_name(isa));
  const int64_t rows = w.rows;
  if (rows <= 0) return;
  const int64_t step = kPanels * kPanelRows, steps = (rows + step - 1) / step;
  if (isa == MatvecIsa::kScalar) {
    parallel_for(0, steps, 1, [&](int64_t s0, int64_t s1) {
      columns_scalar(x, w, s0 * step, std::min(rows, s1 * step), y, ldy, bias);
    });
    return;
  }
  const size_t code_bytes = static_cast<size_t>(kPanels * x.blocks() * kBlockBytes);
  const size_t scale_bytes = static_cast<size_t>(kPanels * x.blocks() * kPanelRows) * sizeof(float);
  // Whole panel groups, handed out as threads ask (a static split left one of 2 vCPUs waiting
  // for ~7% of an int8 prefill's GEMM time): each output column is one step's, summed in block
  // order, whichever thread runs it.
  std::vector<std::unique_ptr<AlignedBytes>> buffers(static_cast<size_t>(num_threads()));
  parallel_for_dynamic(0, steps, 1, [&](int64_t s0, int64_t s1) {
    std::unique_ptr<AlignedBytes>& buffer = buffers[static_cast<size_t>(omp_get_thread_num())];
    if (buffer == nullptr) buffer = std::make_unique<AlignedBytes>(code_bytes + scale_bytes);
    float* pd = reinterpret_cast<float*>(buffer->p + code_bytes);
    for (int64_t s = s0; s < s1; ++s)
      columns_panels(isa, x, w, s * step, std::min(rows, (s + 1) * step), buffer->p, pd, y, ldy, bias);
  });
}

}  // namespace trident::kernels::cpu
