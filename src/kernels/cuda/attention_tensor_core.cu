// The tensor-core path of the fused attention (design: attention.cu): bf16 and f16, WMMA
// 16x16x16 products, cp.async staging, sm_80+.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include "kernels/cuda/attention_common.cuh"

namespace trident::cuda::attention_detail {
namespace {

// ---------------------------------------------------------------------------------------
// Tensor-core path (bf16, f16; sm_80+). Kernel bodies compile only for sm_80 and newer; the
// launcher checks the device before choosing this path.
namespace wmma = nvcuda::wmma;

constexpr int kTcThreads = 128;  // 4 warps, 16 rows of every product each
constexpr int kLDS = 64 + 4;     // f32 staging stride (scores, outputs): 64 columns + 16 B
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// Shared memory tiles of T are (rows, D + 8): the 16-byte pad moves consecutive rows to
// different banks for the fragment loads; rows and columns start 32-byte aligned as WMMA needs.
template <int D>
constexpr int tile_bytes(int rows) {
  return rows * (D + 8) * 2;
}

template <class T>
using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major>;
template <class T>
using FragBRow = wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major>;
template <class T>
using FragBCol = wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;
constexpr int kNE = 8;  // elements of FragC per lane (static_assert in probe_layout)

__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool pred) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  const int bytes = pred ? 16 : 0;  // 0: zero-fill the 16 bytes, read nothing
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(bytes) : "memory");
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

// Rows [row0, row0 + ROWS) of a head (head points at its row 0) into dst (ROWS, D + 8), 16
// bytes per copy; rows past T and columns past HS are zero-filled.
template <int ROWS, int D, class T>
__device__ __forceinline__ void load_rows_async(T* dst, const T* head, int64_t stride, int row0, int T_,
                                                int HS) {
  constexpr int kChunks = D / 8;
  for (int c = threadIdx.x; c < ROWS * kChunks; c += kTcThreads) {
    const int r = c / kChunks, col = (c % kChunks) * 8, t = row0 + r;
    const bool ok = t < T_ && col < HS;
    cp_async16(dst + r * (D + 8) + col, ok ? head + t * stride + col : head, ok);
  }
}

// Note [Accumulator layout probe]
// Which (row, column) of the 16x16 tile each of a lane's accumulator elements holds is
// unspecified by WMMA. Loading a tile whose entries are their own indices r * 16 + c into an
// accumulator fragment tells every lane, for each element, where it sits: the per-row
// rescaling of O (forward) and the per-row / per-column lse, delta and mask (backward) then
// work on fragments in registers. All accumulator fragments of one type share the layout.
// scratch: 256 floats, 32-byte aligned, owned by the warp.
// The layout as 8-bit (row << 4 | col) per element, packed in two registers.
struct LayoutMap {
  uint32_t packed[2];
  __device__ __forceinline__ int row(int i) const { return (packed[i >> 2] >> (8 * (i & 3) + 4)) & 15; }
  __device__ __forceinline__ int col(int i) const { return (packed[i >> 2] >> (8 * (i & 3))) & 15; }
};

template <class Frag>
__device__ __forceinline__ LayoutMap probe_layout(float* scratch) {
  static_assert(Frag::num_elements == kNE, "unexpected accumulator fragment size");
  const int lane = threadIdx.x & 31;
  for (int e = lane; e < 256; e += 32) scratch[e] = static_cast<float>(e);
  __syncwarp();
  Frag f;
  wmma::load_matrix_sync(f, scratch, 16, wmma::mem_row_major);
  LayoutMap map{{0u, 0u}};
#pragma unroll
  for (int i = 0; i < kNE; ++i)
    map.packed[i >> 2] |= static_cast<uint32_t>(static_cast<int>(f.x[i])) << (8 * (i & 3));
  __syncwarp();
  return map;
}

// A warp's 16 x D accumulators (row r multiplied by row_scale[r] when given) to rows
// [row0, row0 + 16) of a head, through the warp's f32 staging area (16, kLDS) in passes of
// 64 columns, as 16-byte stores; rows past T and columns past HS are not written.
template <class T, int D>
__device__ __forceinline__ void store_rows(FragC (&f)[D / 16], float* stage, T* head, int64_t stride,
                                           int row0, int T_, int HS, const float* row_scale) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int c0 = 0; c0 < D; c0 += 64) {
#pragma unroll
    for (int n = 0; n < D / 16; ++n)
      if (n * 16 >= c0 && n * 16 < c0 + 64)
        wmma::store_matrix_sync(stage + (n * 16 - c0), f[n], kLDS, wmma::mem_row_major);
    __syncwarp();
    constexpr int kMaxChunks = 8;  // 64 columns / 8
    const int chunks = min(64, D - c0) / 8;
    for (int e = lane; e < 16 * chunks; e += 32) {
      const int r = e / chunks, c = (e % chunks) * 8, t = row0 + r;
      if (t >= T_ || c0 + c >= HS) continue;
      const float mul = row_scale ? row_scale[r] : 1.f;
      alignas(16) T vals[kMaxChunks];
#pragma unroll
      for (int i = 0; i < 8; ++i) vals[i] = from_acc<T>(stage[r * kLDS + c + i] * mul);
      *reinterpret_cast<uint4*>(head + t * stride + c0 + c) = *reinterpret_cast<const uint4*>(vals);
    }
    __syncwarp();
  }
}

// Forward: block = (batch, head, 64 queries); key tiles of 64, double-buffered.
template <int D>
struct FwdLayout {
  static constexpr int kBr = 64, kBc = 64, kLDP = kBc + 8;
  static constexpr int kTile = tile_bytes<D>(kBc);
  // Per warp: scores (16, kLDS) f32, then P (16, kLDP) T. The Q tile is staged here too,
  // before the loop (its fragments then live in registers).
  static constexpr int kWarp = 16 * kLDS * 4 + 16 * kLDP * 2;
  static constexpr int kK = 0, kV = 2 * kTile, kRegion = 4 * kTile;
  static constexpr int kAlpha = kRegion + 4 * kWarp, kInvL = kAlpha + 64 * 4;
  static constexpr int kBytes = kInvL + 64 * 4;
  static_assert(tile_bytes<D>(kBr) <= 4 * kWarp, "Q tile must fit in the warp areas");
};

template <class T, int D>
__global__ void __launch_bounds__(kTcThreads)
    tc_forward_kernel(View<T> out, float* lse, View<const T> q, View<const T> k, View<const T> v, Shape s,
                      float scale_log2) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using L = FwdLayout<D>;
  constexpr int Br = L::kBr, Bc = L::kBc, LD = D + 8, ND = D / 16, NC = Bc / 16, LDP = L::kLDP;
  unsigned char* smem = dynamic_smem();
  T* Ks = reinterpret_cast<T*>(smem + L::kK);
  T* Vs = reinterpret_cast<T*>(smem + L::kV);
  T* Qs = reinterpret_cast<T*>(smem + L::kRegion);
  float* alpha_s = reinterpret_cast<float*>(smem + L::kAlpha);
  float* inv_l_s = reinterpret_cast<float*>(smem + L::kInvL);
  const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float* S_s = reinterpret_cast<float*>(smem + L::kRegion + w * L::kWarp);
  T* P_s = reinterpret_cast<T*>(smem + L::kRegion + w * L::kWarp + 16 * kLDS * 4);

  const int64_t BH = static_cast<int64_t>(s.B) * s.NH, ntiles = (s.T + Br - 1) / Br;
  const int64_t bh = blockIdx.x % BH, tile = ntiles - 1 - blockIdx.x / BH;  // longest first
  const int64_t b = bh / s.NH, h = bh % s.NH, g = h / s.group;
  const int q0 = static_cast<int>(tile) * Br;

  const LayoutMap rc = probe_layout<FragC>(S_s);
  __syncthreads();  // every warp is done with its area before Q lands on it

  const T* k_head = k.row(b, g, 0);
  const T* v_head = v.row(b, g, 0);
  load_rows_async<Br, D>(Qs, q.row(b, h, 0), q.ts, q0, s.T, s.HS);
  cp_async_commit();
  // Key tiles [jf, nkt): causal ends at the diagonal, a window starts at the first query's.
  const int nkt = s.causal ? (min(s.T, q0 + Br) - 1) / Bc + 1 : (s.T + Bc - 1) / Bc;
  const int jf = s.first_key(q0) / Bc;
  load_rows_async<Bc, D>(Ks + (jf & 1) * Bc * LD, k_head, k.ts, jf * Bc, s.T, s.HS);
  load_rows_async<Bc, D>(Vs + (jf & 1) * Bc * LD, v_head, v.ts, jf * Bc, s.T, s.HS);
  cp_async_commit();
  cp_async_wait<1>();  // Q
  __syncthreads();
  FragA<T> qf[ND];
#pragma unroll
  for (int kd = 0; kd < ND; ++kd) wmma::load_matrix_sync(qf[kd], Qs + 16 * w * LD + kd * 16, LD);
  __syncthreads();  // the Q tile's area becomes the warps' score areas

  FragC o[ND];
#pragma unroll
  for (int n = 0; n < ND; ++n) wmma::fill_fragment(o[n], 0.f);
  // Softmax lanes: two per row, 32 columns each, visited in a rotated order so that the 32
  // lanes read 32 different banks of S_s (rows are kLDS = 4 mod 32 banks apart).
  const int r = lane >> 1, half = lane & 1, rot = 2 * (r >> 3) + half;
  const int qrow = q0 + 16 * w + r;
  float m = -CUDART_INF_F, l = 0.f;  // running max (log2 units) and sum of the row

  for (int j = jf; j < nkt; ++j) {
    if (j + 1 < nkt) {
      const int st = (j + 1) & 1;
      load_rows_async<Bc, D>(Ks + st * Bc * LD, k_head, k.ts, (j + 1) * Bc, s.T, s.HS);
      load_rows_async<Bc, D>(Vs + st * Bc * LD, v_head, v.ts, (j + 1) * Bc, s.T, s.HS);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const T* Kt = Ks + (j & 1) * Bc * LD;
    const T* Vt = Vs + (j & 1) * Bc * LD;
    const int k0 = j * Bc;
    // 16-key chunks with any key this warp's rows can see (the rest is masked anyway).
    int nch = min(NC, (s.T - k0 + 15) / 16);
    if (s.causal) {
      const int reach = q0 + 16 * w + 15 - k0;
      nch = reach < 0 ? 0 : min(nch, reach / 16 + 1);
    }

    // S = Q K^T: K^T is K read column-major.
#pragma unroll
    for (int n = 0; n < NC; ++n) {
      if (n >= nch) continue;
      FragC sf;
      wmma::fill_fragment(sf, 0.f);
#pragma unroll
      for (int kd = 0; kd < ND; ++kd) {
        FragBCol<T> kb;
        wmma::load_matrix_sync(kb, Kt + n * 16 * LD + kd * 16, LD);
        wmma::mma_sync(sf, qf[kd], kb, sf);
      }
      wmma::store_matrix_sync(S_s + n * 16, sf, kLDS, wmma::mem_row_major);
    }
    __syncwarp();

    // Online softmax in log2 units: x = scale log2(e) s, p = 2^(x - m). Masked and skipped
    // columns are -inf without reading S_s.
    float x[32];
    float mx = -CUDART_INF_F;
#pragma unroll
    for (int c = 0; c < 32; ++c) {
      const int col = half * 32 + ((c + rot) & 31), key = k0 + col;
      const bool ok = key < s.T && s.sees(key, qrow);
      x[c] = ok ? S_s[r * kLDS + col] * scale_log2 : -CUDART_INF_F;
      mx = fmaxf(mx, x[c]);
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    const float m_new = fmaxf(m, mx);
    const float m_use = m_new == -CUDART_INF_F ? 0.f : m_new;  // a row with no key yet
    float sum = 0.f;
#pragma unroll
    for (int c = 0; c < 32; ++c) {
      const int col = half * 32 + ((c + rot) & 31);
      const float p = exp2f(x[c] - m_use);
      sum += p;
      P_s[r * LDP + col] = from_acc<T>(p);
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    const float alpha = exp2f(m - m_use);
    l = alpha * l + sum;
    m = m_new;
    if (half == 0) alpha_s[16 * w + r] = alpha;
    __syncwarp();

    // O = alpha O + P V.
    float a[kNE];
#pragma unroll
    for (int i = 0; i < kNE; ++i) a[i] = alpha_s[16 * w + rc.row(i)];
#pragma unroll
    for (int n = 0; n < ND; ++n)
#pragma unroll
      for (int i = 0; i < kNE; ++i) o[n].x[i] *= a[i];
#pragma unroll
    for (int kk = 0; kk < NC; ++kk) {
      if (kk >= nch) continue;
      FragA<T> pa;
      wmma::load_matrix_sync(pa, P_s + kk * 16, LDP);
#pragma unroll
      for (int n = 0; n < ND; ++n) {
        FragBRow<T> vb;
        wmma::load_matrix_sync(vb, Vt + kk * 16 * LD + n * 16, LD);
        wmma::mma_sync(o[n], pa, vb, o[n]);
      }
    }
    __syncthreads();  // this stage's K, V are free for the load two tiles ahead
  }

  // lse in natural units: (m + log2 l) ln 2. Every real row has seen itself, so l > 0.
  if (half == 0) {
    inv_l_s[16 * w + r] = 1.f / l;
    if (qrow < s.T) lse[bh * s.T + qrow] = (m + log2f(l)) * kLn2;
  }
  __syncwarp();
  store_rows<T, D>(o, S_s, out.row(b, h, 0), out.ts, q0 + 16 * w, s.T, s.HS, inv_l_s + 16 * w);
#endif
}

// dq pass: block = (batch, query head, 64 queries); key tiles of kBc, double-buffered.
template <int D>
struct DqLayout {
  static constexpr int kBr = 64, kBc = D > 64 ? 32 : 64, kLDP = kBc + 8;
  // Per warp: dS (16, kLDP) T during the loop, the f32 staging of dq at the end.
  static constexpr int kWarp = 16 * kLDS * 4 > 16 * kLDP * 2 ? 16 * kLDS * 4 : 16 * kLDP * 2;
  static constexpr int kQ = 0, kG = tile_bytes<D>(kBr), kK = 2 * tile_bytes<D>(kBr);
  static constexpr int kV = kK + 2 * tile_bytes<D>(kBc), kLse = kV + 2 * tile_bytes<D>(kBc);
  static constexpr int kDelta = kLse + kBr * 4, kRegion = kDelta + kBr * 4;
  static constexpr int kBytes = kRegion + 4 * kWarp;
};

template <class T, int D>
__global__ void __launch_bounds__(kTcThreads)
    tc_dq_kernel(View<T> dq, View<const T> dout, View<const T> q, View<const T> k, View<const T> v,
                 const float* lse, const float* delta, Shape s, float scale, float scale_log2) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using L = DqLayout<D>;
  constexpr int Br = L::kBr, Bc = L::kBc, LD = D + 8, ND = D / 16, NC = Bc / 16, LDP = L::kLDP;
  unsigned char* smem = dynamic_smem();
  T* Qs = reinterpret_cast<T*>(smem + L::kQ);
  T* Gs = reinterpret_cast<T*>(smem + L::kG);
  T* Ks = reinterpret_cast<T*>(smem + L::kK);
  T* Vs = reinterpret_cast<T*>(smem + L::kV);
  float* lse_s = reinterpret_cast<float*>(smem + L::kLse);  // log2 units
  float* delta_s = reinterpret_cast<float*>(smem + L::kDelta);
  const int w = threadIdx.x >> 5;
  float* stage = reinterpret_cast<float*>(smem + L::kRegion + w * L::kWarp);
  T* dS_s = reinterpret_cast<T*>(smem + L::kRegion + w * L::kWarp);

  const int64_t BH = static_cast<int64_t>(s.B) * s.NH, ntiles = (s.T + Br - 1) / Br;
  const int64_t bh = blockIdx.x % BH, tile = ntiles - 1 - blockIdx.x / BH;
  const int64_t b = bh / s.NH, h = bh % s.NH, g = h / s.group;
  const int q0 = static_cast<int>(tile) * Br;

  const LayoutMap rc = probe_layout<FragC>(stage);

  const T* k_head = k.row(b, g, 0);
  const T* v_head = v.row(b, g, 0);
  load_rows_async<Br, D>(Qs, q.row(b, h, 0), q.ts, q0, s.T, s.HS);
  load_rows_async<Br, D>(Gs, dout.row(b, h, 0), dout.ts, q0, s.T, s.HS);
  for (int t = threadIdx.x; t < Br; t += kTcThreads) {
    const int qi = q0 + t;
    lse_s[t] = qi < s.T ? lse[bh * s.T + qi] * kLog2e : 0.f;
    delta_s[t] = qi < s.T ? delta[bh * s.T + qi] : 0.f;
  }
  cp_async_commit();
  const int nkt = s.causal ? (min(s.T, q0 + Br) - 1) / Bc + 1 : (s.T + Bc - 1) / Bc;
  const int jf = s.first_key(q0) / Bc;
  load_rows_async<Bc, D>(Ks + (jf & 1) * Bc * LD, k_head, k.ts, jf * Bc, s.T, s.HS);
  load_rows_async<Bc, D>(Vs + (jf & 1) * Bc * LD, v_head, v.ts, jf * Bc, s.T, s.HS);
  cp_async_commit();

  FragC acc[ND];
#pragma unroll
  for (int n = 0; n < ND; ++n) wmma::fill_fragment(acc[n], 0.f);
  for (int j = jf; j < nkt; ++j) {
    if (j + 1 < nkt) {
      const int st = (j + 1) & 1;
      load_rows_async<Bc, D>(Ks + st * Bc * LD, k_head, k.ts, (j + 1) * Bc, s.T, s.HS);
      load_rows_async<Bc, D>(Vs + st * Bc * LD, v_head, v.ts, (j + 1) * Bc, s.T, s.HS);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const T* Kt = Ks + (j & 1) * Bc * LD;
    const T* Vt = Vs + (j & 1) * Bc * LD;
    const int k0 = j * Bc;
    int nch = min(NC, (s.T - k0 + 15) / 16);
    if (s.causal) {
      const int reach = q0 + 16 * w + 15 - k0;
      nch = reach < 0 ? 0 : min(nch, reach / 16 + 1);
    }
    if (nch > 0) {
      // S = Q K^T and dP = dO V^T for this warp's 16 queries.
      FragC sf[NC], dp[NC];
#pragma unroll
      for (int n = 0; n < NC; ++n) {
        wmma::fill_fragment(sf[n], 0.f);
        wmma::fill_fragment(dp[n], 0.f);
      }
#pragma unroll
      for (int kd = 0; kd < ND; ++kd) {
        FragA<T> qa, ga;
        wmma::load_matrix_sync(qa, Qs + 16 * w * LD + kd * 16, LD);
        wmma::load_matrix_sync(ga, Gs + 16 * w * LD + kd * 16, LD);
#pragma unroll
        for (int n = 0; n < NC; ++n) {
          if (n >= nch) continue;
          FragBCol<T> kb, vb;
          wmma::load_matrix_sync(kb, Kt + n * 16 * LD + kd * 16, LD);
          wmma::mma_sync(sf[n], qa, kb, sf[n]);
          wmma::load_matrix_sync(vb, Vt + n * 16 * LD + kd * 16, LD);
          wmma::mma_sync(dp[n], ga, vb, dp[n]);
        }
      }
      // dS = P * (dP - delta), P = 2^(scale log2(e) s - lse log2(e)), in registers.
#pragma unroll
      for (int n = 0; n < NC; ++n) {
        if (n >= nch) continue;
#pragma unroll
        for (int i = 0; i < kNE; ++i) {
          const int row = rc.row(i), col = n * 16 + rc.col(i);
          const int qi = q0 + 16 * w + row, key = k0 + col;
          const bool ok = key < s.T && qi < s.T && s.sees(key, qi);
          const float p = ok ? exp2f(sf[n].x[i] * scale_log2 - lse_s[16 * w + row]) : 0.f;
          dS_s[row * LDP + col] = from_acc<T>(p * (dp[n].x[i] - delta_s[16 * w + row]));
        }
      }
      __syncwarp();
      // dQ += dS K.
#pragma unroll
      for (int kk = 0; kk < NC; ++kk) {
        if (kk >= nch) continue;
        FragA<T> da;
        wmma::load_matrix_sync(da, dS_s + kk * 16, LDP);
#pragma unroll
        for (int n = 0; n < ND; ++n) {
          FragBRow<T> kb;
          wmma::load_matrix_sync(kb, Kt + kk * 16 * LD + n * 16, LD);
          wmma::mma_sync(acc[n], da, kb, acc[n]);
        }
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int n = 0; n < ND; ++n)
#pragma unroll
    for (int i = 0; i < kNE; ++i) acc[n].x[i] *= scale;
  store_rows<T, D>(acc, stage, dq.row(b, h, 0), dq.ts, q0 + 16 * w, s.T, s.HS, nullptr);
#endif
}

// dk/dv pass: block = (batch, kv head, 64 keys); query tiles of kBr, double-buffered, over the
// group's heads. Works on S^T = K Q^T so that each warp's 16 keys are the rows of everything.
template <int D>
struct DkvLayout {
  static constexpr int kBc = 64, kBr = D > 64 ? 32 : 64, kLDP = kBr + 8;
  // Per warp: P^T and dS^T (16, kLDP) T during the loop, the f32 staging at the end.
  static constexpr int kWarp = 16 * kLDS * 4 > 2 * 16 * kLDP * 2 ? 16 * kLDS * 4 : 2 * 16 * kLDP * 2;
  static constexpr int kK = 0, kV = tile_bytes<D>(kBc), kQ = 2 * tile_bytes<D>(kBc);
  static constexpr int kG = kQ + 2 * tile_bytes<D>(kBr), kLse = kG + 2 * tile_bytes<D>(kBr);
  static constexpr int kDelta = kLse + 2 * kBr * 4, kRegion = kDelta + 2 * kBr * 4;
  static constexpr int kBytes = kRegion + 4 * kWarp;
};

template <class T, int D>
__global__ void __launch_bounds__(kTcThreads)
    tc_dkdv_kernel(View<T> dk, View<T> dv, View<const T> dout, View<const T> q, View<const T> k,
                   View<const T> v, const float* lse, const float* delta, Shape s, float scale,
                   float scale_log2) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using L = DkvLayout<D>;
  constexpr int Br = L::kBr, Bc = L::kBc, LD = D + 8, ND = D / 16, NB = Br / 16, LDP = L::kLDP;
  unsigned char* smem = dynamic_smem();
  T* Ks = reinterpret_cast<T*>(smem + L::kK);
  T* Vs = reinterpret_cast<T*>(smem + L::kV);
  T* Qs = reinterpret_cast<T*>(smem + L::kQ);  // 2 stages
  T* Gs = reinterpret_cast<T*>(smem + L::kG);  // 2 stages
  float* lse_s = reinterpret_cast<float*>(smem + L::kLse);  // 2 stages, log2 units
  float* delta_s = reinterpret_cast<float*>(smem + L::kDelta);
  const int w = threadIdx.x >> 5;
  float* stage = reinterpret_cast<float*>(smem + L::kRegion + w * L::kWarp);
  T* Pt_s = reinterpret_cast<T*>(smem + L::kRegion + w * L::kWarp);
  T* dSt_s = Pt_s + 16 * LDP;

  const int NKV = s.NH / s.group;
  const int64_t BG = static_cast<int64_t>(s.B) * NKV;
  const int64_t bg = blockIdx.x % BG, tile = blockIdx.x / BG;  // causal: first tiles cost most
  const int64_t b = bg / NKV, g = bg % NKV;
  const int k0 = static_cast<int>(tile) * Bc;

  const LayoutMap rc = probe_layout<FragC>(stage);

  load_rows_async<Bc, D>(Ks, k.row(b, g, 0), k.ts, k0, s.T, s.HS);
  load_rows_async<Bc, D>(Vs, v.row(b, g, 0), v.ts, k0, s.T, s.HS);
  // Work items: (query head of the group, query tile that sees these keys).
  // Causal: none before k0; a window: none past the last key's window.
  const int nq = (s.queries_end(min(s.T, k0 + Bc) - 1) + Br - 1) / Br, i0 = s.causal ? k0 / Br : 0,
            nqi = nq - i0;
  const int items = s.group * nqi;
  auto issue = [&](int it, int st) {
    const int64_t h = g * s.group + it / nqi;
    const int qb = (i0 + it % nqi) * Br;
    load_rows_async<Br, D>(Qs + st * Br * LD, q.row(b, h, 0), q.ts, qb, s.T, s.HS);
    load_rows_async<Br, D>(Gs + st * Br * LD, dout.row(b, h, 0), dout.ts, qb, s.T, s.HS);
    const int64_t rows0 = (b * s.NH + h) * s.T;
    for (int t = threadIdx.x; t < Br; t += kTcThreads) {
      const int qi = qb + t;
      lse_s[st * Br + t] = qi < s.T ? lse[rows0 + qi] * kLog2e : 0.f;
      delta_s[st * Br + t] = qi < s.T ? delta[rows0 + qi] : 0.f;
    }
  };
  issue(0, 0);
  cp_async_commit();

  FragC dkf[ND], dvf[ND];
#pragma unroll
  for (int n = 0; n < ND; ++n) {
    wmma::fill_fragment(dkf[n], 0.f);
    wmma::fill_fragment(dvf[n], 0.f);
  }
  const int key_base = k0 + 16 * w;  // this warp's first key
  for (int it = 0; it < items; ++it) {
    if (it + 1 < items) {
      issue(it + 1, (it + 1) & 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const int st = it & 1;
    const T* Qt = Qs + st * Br * LD;
    const T* Gt = Gs + st * Br * LD;
    const float* lse_t = lse_s + st * Br;
    const float* delta_t = delta_s + st * Br;
    const int qb = (i0 + it % nqi) * Br;
    // 16-query chunks that see any of this warp's keys and hold real queries.
    const int n_first = s.causal ? max(0, min(NB, (key_base - qb) / 16)) : 0;
    const int q_end = s.queries_end(min(s.T - 1, key_base + 15));  // past this warp's last key's window
    const int n_last = max(0, min(NB, (q_end - qb + 15) / 16));
    if (n_first < n_last) {
      // dP^T = V dO^T (dO read column-major), every chunk at once: V's fragments load once.
      FragC dp[NB];
#pragma unroll
      for (int n = 0; n < NB; ++n) wmma::fill_fragment(dp[n], 0.f);
#pragma unroll
      for (int kd = 0; kd < ND; ++kd) {
        FragA<T> va;
        wmma::load_matrix_sync(va, Vs + 16 * w * LD + kd * 16, LD);
#pragma unroll
        for (int n = 0; n < NB; ++n) {
          if (n < n_first || n >= n_last) continue;
          FragBCol<T> gf;
          wmma::load_matrix_sync(gf, Gt + n * 16 * LD + kd * 16, LD);
          wmma::mma_sync(dp[n], va, gf, dp[n]);
        }
      }
      // S^T = K Q^T one chunk at a time (fewer live accumulators: no spills at D = 64), each
      // turned into P^T and dS^T = P^T * (dP^T - delta) at once: rows are keys, columns queries.
#pragma unroll
      for (int n = 0; n < NB; ++n) {
        if (n < n_first || n >= n_last) continue;
        FragC sf;
        wmma::fill_fragment(sf, 0.f);
#pragma unroll
        for (int kd = 0; kd < ND; ++kd) {
          FragA<T> ka;
          FragBCol<T> qf;
          wmma::load_matrix_sync(ka, Ks + 16 * w * LD + kd * 16, LD);
          wmma::load_matrix_sync(qf, Qt + n * 16 * LD + kd * 16, LD);
          wmma::mma_sync(sf, ka, qf, sf);
        }
#pragma unroll
        for (int i = 0; i < kNE; ++i) {
          const int row = rc.row(i), col = n * 16 + rc.col(i);
          const int key = key_base + row, qi = qb + col;
          const bool ok = key < s.T && qi < s.T && s.sees(key, qi);
          const float p = ok ? exp2f(sf.x[i] * scale_log2 - lse_t[col]) : 0.f;
          Pt_s[row * LDP + col] = from_acc<T>(p);
          dSt_s[row * LDP + col] = from_acc<T>(p * (dp[n].x[i] - delta_t[col]));
        }
      }
      __syncwarp();
      // dV += P^T dO, dK += dS^T Q.
#pragma unroll
      for (int kq = 0; kq < NB; ++kq) {
        if (kq < n_first || kq >= n_last) continue;
        FragA<T> pa, da;
        wmma::load_matrix_sync(pa, Pt_s + kq * 16, LDP);
        wmma::load_matrix_sync(da, dSt_s + kq * 16, LDP);
#pragma unroll
        for (int n = 0; n < ND; ++n) {
          FragBRow<T> gb, qb_frag;
          wmma::load_matrix_sync(gb, Gt + kq * 16 * LD + n * 16, LD);
          wmma::mma_sync(dvf[n], pa, gb, dvf[n]);
          wmma::load_matrix_sync(qb_frag, Qt + kq * 16 * LD + n * 16, LD);
          wmma::mma_sync(dkf[n], da, qb_frag, dkf[n]);
        }
      }
    }
    __syncthreads();  // this stage is free for the load two items ahead
  }
#pragma unroll
  for (int n = 0; n < ND; ++n)
#pragma unroll
    for (int i = 0; i < kNE; ++i) dkf[n].x[i] *= scale;
  store_rows<T, D>(dkf, stage, dk.row(b, g, 0), dk.ts, key_base, s.T, s.HS, nullptr);
  store_rows<T, D>(dvf, stage, dv.row(b, g, 0), dv.ts, key_base, s.T, s.HS, nullptr);
#endif
}

// The padded head dim of the tensor-core kernels for HS (a multiple of 16, at most 128).
template <class Fn>
void dispatch_head_dim(int HS, Fn&& fn) {
  if (HS <= 32) return fn(std::integral_constant<int, 32>{});
  if (HS <= 64) return fn(std::integral_constant<int, 64>{});
  return fn(std::integral_constant<int, 128>{});
}

}  // namespace

// Fast path only for 16-byte aligned rows: every base pointer, and every stride that is used
// (a dim of size 1 never moves the pointer), a multiple of 8 elements.
bool rows_aligned(const Heads& x, int64_t B, int64_t heads, int64_t T) {
  const bool base = reinterpret_cast<uintptr_t>(x.data) % 16 == 0;
  return base && (B == 1 || x.batch_stride % 8 == 0) && (heads == 1 || x.head_stride % 8 == 0) &&
         (T == 1 || x.time_stride % 8 == 0);
}

bool tensor_core_shape(int dtype, const AttentionDims& d, const DeviceInfo& dev) {
  return (dtype == kBF16 || dtype == kF16) && d.HS % 16 == 0 && d.HS <= 128 && dev.major >= 8 &&
         dev.max_smem >= DqLayout<128>::kBytes && dev.max_smem >= FwdLayout<128>::kBytes &&
         dev.max_smem >= DkvLayout<128>::kBytes;
}

namespace {

template <class T>
void tc_forward(Heads out, float* lse, Heads q, Heads k, Heads v, const Shape& s, double scale) {
  dispatch_head_dim(s.HS, [&](auto dim) {
    constexpr int D = decltype(dim)::value;
    auto kernel = tc_forward_kernel<T, D>;
    allow_smem(kernel, FwdLayout<D>::kBytes);
    const int64_t blocks = static_cast<int64_t>(s.B) * s.NH * ((s.T + FwdLayout<D>::kBr - 1) / FwdLayout<D>::kBr);
    kernel<<<static_cast<unsigned>(blocks), kTcThreads, FwdLayout<D>::kBytes>>>(
        view_of<T>(out), lse, view_of<const T>(q), view_of<const T>(k), view_of<const T>(v), s,
        static_cast<float>(scale) * kLog2e);
  });
}

template <class T>
void tc_backward(Heads dq, Heads dk, Heads dv, Heads dout, Heads q, Heads k, Heads v, const float* lse,
                 const float* delta, const Shape& s, double scale) {
  const float sc = static_cast<float>(scale), sc_log2 = sc * kLog2e;
  dispatch_head_dim(s.HS, [&](auto dim) {
    constexpr int D = decltype(dim)::value;
    {
      auto kernel = tc_dkdv_kernel<T, D>;
      allow_smem(kernel, DkvLayout<D>::kBytes);
      const int64_t blocks =
          static_cast<int64_t>(s.B) * (s.NH / s.group) * ((s.T + DkvLayout<D>::kBc - 1) / DkvLayout<D>::kBc);
      kernel<<<static_cast<unsigned>(blocks), kTcThreads, DkvLayout<D>::kBytes>>>(
          view_of<T>(dk), view_of<T>(dv), view_of<const T>(dout), view_of<const T>(q), view_of<const T>(k),
          view_of<const T>(v), lse, delta, s, sc, sc_log2);
    }
    {
      auto kernel = tc_dq_kernel<T, D>;
      allow_smem(kernel, DqLayout<D>::kBytes);
      const int64_t blocks = static_cast<int64_t>(s.B) * s.NH * ((s.T + DqLayout<D>::kBr - 1) / DqLayout<D>::kBr);
      kernel<<<static_cast<unsigned>(blocks), kTcThreads, DqLayout<D>::kBytes>>>(
          view_of<T>(dq), view_of<const T>(dout), view_of<const T>(q), view_of<const T>(k), view_of<const T>(v),
          lse, delta, s, sc, sc_log2);
    }
  });
}

}  // namespace

void tensor_core_forward(int dtype, Heads out, float* lse, Heads q, Heads k, Heads v, const Shape& s, double scale) {
  if (dtype == kBF16) return tc_forward<bf16_t>(out, lse, q, k, v, s, scale);
  tc_forward<f16_t>(out, lse, q, k, v, s, scale);
}

void tensor_core_backward(int dtype, Heads dq, Heads dk, Heads dv, Heads dout, Heads q, Heads k, Heads v,
                          const float* lse, const float* delta, const Shape& s, double scale) {
  if (dtype == kBF16) return tc_backward<bf16_t>(dq, dk, dv, dout, q, k, v, lse, delta, s, scale);
  tc_backward<f16_t>(dq, dk, dv, dout, q, k, v, lse, delta, s, scale);
}

}  // namespace trident::cuda::attention_detail
