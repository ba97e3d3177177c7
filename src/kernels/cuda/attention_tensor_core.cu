// The tensor-core path of the fused attention (design: attention.cu): bf16 and f16,
// mma.sync m16n8k16 products whose operands come from shared memory by ldmatrix, with the
// scores, probabilities and their gradients kept in registers; cp.async staging; sm_80+.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/cuda/attention_common.cuh"

namespace trident::cuda::attention_detail {
namespace {

// ---------------------------------------------------------------------------------------
// Note [mma.sync fragments]
// One warp multiplies a 16x16 A by a 16x8 B into a 16x8 f32 C (PTX ISA, mma.m16n8k16). Lane
// l (group gr = l / 4, thread t = l % 4 of the group) holds
//   C: c0, c1 at (row gr, columns 2t, 2t+1), c2, c3 at (row gr + 8, the same columns);
//   A: four pairs, (gr, 2t..), (gr + 8, 2t..), (gr, 2t + 8..), (gr + 8, 2t + 8..);
//   B: two pairs, (rows 2t.., column gr), (rows 2t + 8.., column gr).
// So the C tiles of two neighbouring 8-column blocks are, pair for pair, the A fragment of
// their 16 columns: P = softmax(S) and dS feed the next product from registers with no trip
// through shared memory (FlashAttention-2). ldmatrix loads four 8x8 tiles of 16-bit values at
// once, lanes 8i..8i+7 naming tile i's rows; a plain load leaves lane l holding row l / 4,
// columns 2(l % 4)..+1 (an A or B fragment from a row-major or "n-major" tile), a .trans load
// the transpose (a B fragment from a row-major k x n tile). Every product below is one of
//   A rows from a row-major tile               load_a
//   B = X^T with X (n, k) row-major            load_b_nk    (K for Q K^T, V for dO V^T, ...)
//   B = X   with X (k, n) row-major            load_b_kn    (V for P V, K for dS K, ...)
constexpr int kThreads = 128;  // 4 warps, each owning 16 rows of every product
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// Shared memory tiles are (rows, D + 8) elements: the 16-byte pad puts the 8 rows of an
// ldmatrix tile in 8 different 16-byte bank groups.
template <int D>
constexpr int tile_bytes(int rows) {
  return rows * (D + 8) * 2;
}

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool pred) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const int bytes = pred ? 16 : 0;  // 0: zero-fill the 16 bytes, read nothing
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(bytes)
               : "memory");
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
  for (int c = threadIdx.x; c < ROWS * kChunks; c += kThreads) {
    const int r = c / kChunks, col = (c % kChunks) * 8, t = row0 + r;
    const bool ok = t < T_ && col < HS;
    cp_async16(dst + r * (D + 8) + col, ok ? head + t * stride + col : head, ok);
  }
}

using Frag = uint32_t[4];
using Acc = float[4];

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const void* p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
#endif
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], const void* p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
#endif
}

// The A fragment of rows [r0, r0 + 16), columns [c0, c0 + 16) of a row-major tile.
template <int LD, class T>
__device__ __forceinline__ void load_a(Frag& a, const T* tile, int r0, int c0) {
  const int lane = threadIdx.x & 31;
  ldsm_x4(a, tile + (r0 + (lane & 15)) * LD + c0 + (lane >> 4) * 8);
}
// B fragments of B = X^T for k in [k0, k0 + 16) and n in [n0, n0 + 16), X (n, k) row-major:
// b[0], b[1] for columns n0..n0+7, b[2], b[3] for n0+8..n0+15.
template <int LD, class T>
__device__ __forceinline__ void load_b_nk(Frag& b, const T* tile, int n0, int k0) {
  const int lane = threadIdx.x & 31;
  ldsm_x4(b, tile + (n0 + (lane & 7) + (lane >> 4) * 8) * LD + k0 + ((lane >> 3) & 1) * 8);
}
// The same for B = X, X (k, n) row-major.
template <int LD, class T>
__device__ __forceinline__ void load_b_kn(Frag& b, const T* tile, int k0, int n0) {
  const int lane = threadIdx.x & 31;
  ldsm_x4_trans(b, tile + (k0 + (lane & 15)) * LD + n0 + (lane >> 4) * 8);
}

template <class T>
__device__ __forceinline__ void mma(Acc& c, const Frag& a, uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same<T, bf16_t>::value) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
#endif
}
// c[2j], c[2j+1] += A times the two 8-column halves of b.
template <class T>
__device__ __forceinline__ void mma_pair(Acc& c0, Acc& c1, const Frag& a, const Frag& b) {
  mma<T>(c0, a, b[0], b[1]);
  mma<T>(c1, a, b[2], b[3]);
}

// Two floats rounded to T, the lower column in the low half.
template <class T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same<T, bf16_t>::value) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  } else {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
}
// The A fragment of columns [16 kk, 16 kk + 16) of a row of C tiles (Note [mma.sync fragments]).
template <class T>
__device__ __forceinline__ void acc_to_a(Frag& a, const Acc& lo, const Acc& hi) {
  a[0] = pack2<T>(lo[0], lo[1]);
  a[1] = pack2<T>(lo[2], lo[3]);
  a[2] = pack2<T>(hi[0], hi[1]);
  a[3] = pack2<T>(hi[2], hi[3]);
}
template <int N>
__device__ __forceinline__ void zero(Acc (&c)[N]) {
#pragma unroll
  for (int n = 0; n < N; ++n) c[n][0] = c[n][1] = c[n][2] = c[n][3] = 0.f;
}

// A warp's 16 x D accumulators times `mul` (per row half: rows gr and gr + 8) to rows
// [row0, row0 + 16) of a head; rows past T and columns past HS are not written.
template <class T, int D>
__device__ __forceinline__ void store_rows(const Acc (&c)[D / 8], T* head, int64_t stride, int row0, int T_,
                                           int HS, float mul_lo, float mul_hi) {
  const int lane = threadIdx.x & 31, gr = lane >> 2, t4 = lane & 3;
  const int r_lo = row0 + gr, r_hi = r_lo + 8;
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
    const int col = n * 8 + 2 * t4;
    if (col >= HS) continue;
    if (r_lo < T_)
      *reinterpret_cast<uint32_t*>(head + r_lo * stride + col) = pack2<T>(c[n][0] * mul_lo, c[n][1] * mul_lo);
    if (r_hi < T_)
      *reinterpret_cast<uint32_t*>(head + r_hi * stride + col) = pack2<T>(c[n][2] * mul_hi, c[n][3] * mul_hi);
  }
}

// Whether every (query, key) of rows [r0, r0 + rows) and keys [k0, k0 + n) is real and seen:
// then a tile needs no mask. last_first = first_key(b, r0 + rows - 1): first keys never move
// left as rows go down, so the last row's bounds the tile's window and document starts (a
// document boundary inside the tile puts it past k0).
__device__ __forceinline__ bool all_seen(const Shape& s, int last_first, int r0, int rows, int k0,
                                         int n) {
  if (k0 + n > s.T || r0 + rows > s.T) return false;
  if (!s.causal) return true;
  return k0 + n - 1 <= r0 && last_first <= k0;
}
// The same test on S^T (rows are keys [key0, key0 + keys), columns queries [q0, q0 + n)):
// first_end = queries_end(b, key0), the earliest of the keys' ends.
__device__ __forceinline__ bool all_seen_t(const Shape& s, int first_end, int key0, int keys,
                                           int q0, int n) {
  if (key0 + keys > s.T || q0 + n > s.T) return false;
  if (!s.causal) return true;
  return key0 + keys - 1 <= q0 && q0 + n <= first_end;
}

// Note [Warp tiles]
// Each warp owns MW m16 tiles (16 MW rows) of every product of its block, so each B fragment
// it loads from shared memory feeds MW products: MW = 2 halves the ldmatrix traffic per mma,
// for twice the accumulator registers. Block rows are 4 warps x 16 MW. Measured on an H200
// (bench/results/2026-11-27-h200, GPT-2's shape: HS 64, T 1024, causal), MW = 2 lost in every
// kernel: at 210-250 registers a multiprocessor holds 8 warps instead of 12-16, and the
// forward went from 0.110 to 0.174 ms. So MW = 1 everywhere, and the dk/dv pass takes 32-query
// tiles at D = 64 (0.067 ms faster per backward than 64: twice the items, each with half the
// live accumulators). The macros are compile-time overrides for re-measuring on another GPU
// (scripts/gpu/run.sh's `variants` stage runs such builds side by side).
#ifndef TRIDENT_ATTENTION_FWD_MW64
#define TRIDENT_ATTENTION_FWD_MW64 1
#endif
#ifndef TRIDENT_ATTENTION_DQ_MW64
#define TRIDENT_ATTENTION_DQ_MW64 1
#endif
#ifndef TRIDENT_ATTENTION_DKV_MW64
#define TRIDENT_ATTENTION_DKV_MW64 1
#endif
#ifndef TRIDENT_ATTENTION_DKV_BR64
#define TRIDENT_ATTENTION_DKV_BR64 32
#endif

// The backward's two score products for a warp's MW m tiles (rows a_row0 + 16 mt of the
// row-major tiles A1 and A2): sc = A1 X^T and dp = A2 Y^T, X and Y (n, k) row-major, over the
// 16-column chunks [n_lo, n_hi) of the NCH the accumulators hold (the others stay as they are).
template <class T, int MW, int ND, int NCH, int LD>
__device__ __forceinline__ void score_products(Acc (&sc)[MW][2 * NCH], Acc (&dp)[MW][2 * NCH], const T* A1,
                                               const T* A2, int a_row0, const T* X, const T* Y, int n_lo,
                                               int n_hi) {
#pragma unroll
  for (int kd = 0; kd < ND; ++kd) {
    Frag a1[MW], a2[MW];
#pragma unroll
    for (int mt = 0; mt < MW; ++mt) {
      load_a<LD>(a1[mt], A1, a_row0 + 16 * mt, kd * 16);
      load_a<LD>(a2[mt], A2, a_row0 + 16 * mt, kd * 16);
    }
#pragma unroll
    for (int n = 0; n < NCH; ++n) {
      if (n < n_lo || n >= n_hi) continue;
      Frag xb, yb;
      load_b_nk<LD>(xb, X, n * 16, kd * 16);
      load_b_nk<LD>(yb, Y, n * 16, kd * 16);
#pragma unroll
      for (int mt = 0; mt < MW; ++mt) {
        mma_pair<T>(sc[mt][2 * n], sc[mt][2 * n + 1], a1[mt], xb);
        mma_pair<T>(dp[mt][2 * n], dp[mt][2 * n + 1], a2[mt], yb);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// Forward: block = (batch, head, 64 MW queries); key tiles of 64, double-buffered.
template <int D>
struct FwdLayout {
  static constexpr int kMW = D <= 64 ? TRIDENT_ATTENTION_FWD_MW64 : 1;
  static constexpr int kBr = 64 * kMW, kBc = 64;
  static constexpr int kQ = 0, kK = tile_bytes<D>(kBr), kV = kK + 2 * tile_bytes<D>(kBc);
  static constexpr int kBytes = kV + 2 * tile_bytes<D>(kBc);
};

template <class T, int D>
__global__ void __launch_bounds__(kThreads)
    tc_forward_kernel(View<T> out, float* lse, View<const T> q, View<const T> k, View<const T> v, Shape s,
                      float scale_log2) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using L = FwdLayout<D>;
  constexpr int MW = L::kMW, Br = L::kBr, Bc = L::kBc, LD = D + 8, ND = D / 16, NC = Bc / 16;
  unsigned char* smem = dynamic_smem();
  T* Qs = reinterpret_cast<T*>(smem + L::kQ);
  T* Ks = reinterpret_cast<T*>(smem + L::kK);
  T* Vs = reinterpret_cast<T*>(smem + L::kV);
  const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, gr = lane >> 2, t4 = lane & 3;

  const int64_t BH = static_cast<int64_t>(s.B) * s.NH, ntiles = (s.T + Br - 1) / Br;
  const int64_t bh = blockIdx.x % BH, tile = ntiles - 1 - blockIdx.x / BH;  // longest first
  const int64_t b = bh / s.NH, h = bh % s.NH, g = h / s.group;
  const int q0 = static_cast<int>(tile) * Br, r0 = q0 + 16 * MW * w;  // the warp's first row

  const T* k_head = k.row(b, g, 0);
  const T* v_head = v.row(b, g, 0);
  load_rows_async<Br, D>(Qs, q.row(b, h, 0), q.ts, q0, s.T, s.HS);
  cp_async_commit();
  // Key tiles [jf, nkt): causal ends at the diagonal, a window or document starts at the first
  // query's first key.
  const int nkt = s.causal ? (min(s.T, q0 + Br) - 1) / Bc + 1 : (s.T + Bc - 1) / Bc;
  const int jf = s.first_key(b, q0) / Bc;
  load_rows_async<Bc, D>(Ks + (jf & 1) * Bc * LD, k_head, k.ts, jf * Bc, s.T, s.HS);
  load_rows_async<Bc, D>(Vs + (jf & 1) * Bc * LD, v_head, v.ts, jf * Bc, s.T, s.HS);
  cp_async_commit();
  cp_async_wait<1>();  // Q
  __syncthreads();
  Frag qf[MW][ND];
#pragma unroll
  for (int mt = 0; mt < MW; ++mt)
#pragma unroll
    for (int kd = 0; kd < ND; ++kd) load_a<LD>(qf[mt][kd], Qs, 16 * MW * w + 16 * mt, kd * 16);

  Acc o[MW][D / 8];
  // Rows r0 + 16 mt + gr (lo) and + 8 (hi) of each m tile: running max (log2 units) and this
  // lane's part of the sum (the quad's four parts are added at the end; they share the max).
  float m[MW][2], l[MW][2];
  int first[MW][2];  // the rows' first keys (window, document)
#pragma unroll
  for (int mt = 0; mt < MW; ++mt) {
    zero(o[mt]);
    m[mt][0] = m[mt][1] = -CUDART_INF_F;
    l[mt][0] = l[mt][1] = 0.f;
    first[mt][0] = s.first_key(b, r0 + 16 * mt + gr);
    first[mt][1] = s.first_key(b, r0 + 16 * mt + gr + 8);
  }
  const int last_first = s.first_key(b, r0 + 16 * MW - 1);

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
      const int reach = r0 + 16 * MW - 1 - k0;
      nch = reach < 0 ? 0 : min(nch, reach / 16 + 1);
    }
    const bool masked = !all_seen(s, last_first, r0, 16 * MW, k0, Bc);

    Acc sc[MW][2 * NC];
#pragma unroll
    for (int mt = 0; mt < MW; ++mt) zero(sc[mt]);
#pragma unroll
    for (int n = 0; n < NC; ++n) {
      if (n >= nch) continue;
#pragma unroll
      for (int kd = 0; kd < ND; ++kd) {
        Frag kb;
        load_b_nk<LD>(kb, Kt, n * 16, kd * 16);
#pragma unroll
        for (int mt = 0; mt < MW; ++mt) mma_pair<T>(sc[mt][2 * n], sc[mt][2 * n + 1], qf[mt][kd], kb);
      }
    }
    // Online softmax in log2 units: x = scale log2(e) s, p = 2^(x - m).
#pragma unroll
    for (int mt = 0; mt < MW; ++mt) {
      const int row_lo = r0 + 16 * mt + gr, row_hi = row_lo + 8;
      float mx_lo = -CUDART_INF_F, mx_hi = -CUDART_INF_F;
#pragma unroll
      for (int n = 0; n < 2 * NC; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int key = k0 + n * 8 + 2 * t4 + (i & 1), row = i < 2 ? row_lo : row_hi;
          const bool ok =
              n / 2 < nch && (!masked || (key < s.T && s.sees_from(first[mt][i >> 1], key, row)));
          sc[mt][n][i] = ok ? sc[mt][n][i] * scale_log2 : -CUDART_INF_F;
          if (i < 2) mx_lo = fmaxf(mx_lo, sc[mt][n][i]);
          else mx_hi = fmaxf(mx_hi, sc[mt][n][i]);
        }
#pragma unroll
      for (int d = 1; d <= 2; d <<= 1) {
        mx_lo = fmaxf(mx_lo, __shfl_xor_sync(0xffffffffu, mx_lo, d));
        mx_hi = fmaxf(mx_hi, __shfl_xor_sync(0xffffffffu, mx_hi, d));
      }
      const float mn_lo = fmaxf(m[mt][0], mx_lo), mn_hi = fmaxf(m[mt][1], mx_hi);
      // A row with no key yet (its window or document starts past these keys) shifts by 0.
      const float mu_lo = mn_lo == -CUDART_INF_F ? 0.f : mn_lo;
      const float mu_hi = mn_hi == -CUDART_INF_F ? 0.f : mn_hi;
      const float alpha_lo = exp2f(m[mt][0] - mu_lo), alpha_hi = exp2f(m[mt][1] - mu_hi);
      m[mt][0] = mn_lo;
      m[mt][1] = mn_hi;
      float sum_lo = 0.f, sum_hi = 0.f;
#pragma unroll
      for (int n = 0; n < 2 * NC; ++n) {
        sc[mt][n][0] = exp2f(sc[mt][n][0] - mu_lo);
        sc[mt][n][1] = exp2f(sc[mt][n][1] - mu_lo);
        sc[mt][n][2] = exp2f(sc[mt][n][2] - mu_hi);
        sc[mt][n][3] = exp2f(sc[mt][n][3] - mu_hi);
        sum_lo += sc[mt][n][0] + sc[mt][n][1];
        sum_hi += sc[mt][n][2] + sc[mt][n][3];
      }
      l[mt][0] = alpha_lo * l[mt][0] + sum_lo;
      l[mt][1] = alpha_hi * l[mt][1] + sum_hi;
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        o[mt][n][0] *= alpha_lo;
        o[mt][n][1] *= alpha_lo;
        o[mt][n][2] *= alpha_hi;
        o[mt][n][3] *= alpha_hi;
      }
    }
    // O += P V, P rounded to T (as FA2 does).
#pragma unroll
    for (int kk = 0; kk < NC; ++kk) {
      if (kk >= nch) continue;
      Frag pa[MW];
#pragma unroll
      for (int mt = 0; mt < MW; ++mt) acc_to_a<T>(pa[mt], sc[mt][2 * kk], sc[mt][2 * kk + 1]);
#pragma unroll
      for (int n = 0; n < ND; ++n) {
        Frag vb;
        load_b_kn<LD>(vb, Vt, kk * 16, n * 16);
#pragma unroll
        for (int mt = 0; mt < MW; ++mt) mma_pair<T>(o[mt][2 * n], o[mt][2 * n + 1], pa[mt], vb);
      }
    }
    __syncthreads();  // this stage's K, V are free for the load two tiles ahead
  }

  // lse in natural units: (m + log2 l) ln 2. Every real row has seen itself, so l > 0.
#pragma unroll
  for (int mt = 0; mt < MW; ++mt) {
#pragma unroll
    for (int d = 1; d <= 2; d <<= 1) {
      l[mt][0] += __shfl_xor_sync(0xffffffffu, l[mt][0], d);
      l[mt][1] += __shfl_xor_sync(0xffffffffu, l[mt][1], d);
    }
    const int row_lo = r0 + 16 * mt + gr, row_hi = row_lo + 8;
    if (t4 == 0) {
      if (row_lo < s.T) lse[bh * s.T + row_lo] = (m[mt][0] + log2f(l[mt][0])) * kLn2;
      if (row_hi < s.T) lse[bh * s.T + row_hi] = (m[mt][1] + log2f(l[mt][1])) * kLn2;
    }
    store_rows<T, D>(o[mt], out.row(b, h, 0), out.ts, r0 + 16 * mt, s.T, s.HS, 1.f / l[mt][0], 1.f / l[mt][1]);
  }
#endif
}

// dq pass: block = (batch, query head, 64 MW queries); key tiles of kBc, double-buffered.
template <int D>
struct DqLayout {
  static constexpr int kMW = D <= 64 ? TRIDENT_ATTENTION_DQ_MW64 : 1;
  static constexpr int kBr = 64 * kMW, kBc = D > 64 || kMW > 1 ? 32 : 64;
  static constexpr int kQ = 0, kG = tile_bytes<D>(kBr), kK = 2 * tile_bytes<D>(kBr);
  static constexpr int kV = kK + 2 * tile_bytes<D>(kBc), kBytes = kV + 2 * tile_bytes<D>(kBc);
};

template <class T, int D>
__global__ void __launch_bounds__(kThreads)
    tc_dq_kernel(View<T> dq, View<const T> dout, View<const T> q, View<const T> k, View<const T> v,
                 const float* lse, const float* delta, Shape s, float scale, float scale_log2) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using L = DqLayout<D>;
  constexpr int MW = L::kMW, Br = L::kBr, Bc = L::kBc, LD = D + 8, ND = D / 16, NC = Bc / 16;
  unsigned char* smem = dynamic_smem();
  T* Qs = reinterpret_cast<T*>(smem + L::kQ);
  T* Gs = reinterpret_cast<T*>(smem + L::kG);
  T* Ks = reinterpret_cast<T*>(smem + L::kK);
  T* Vs = reinterpret_cast<T*>(smem + L::kV);
  const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, gr = lane >> 2, t4 = lane & 3;

  const int64_t BH = static_cast<int64_t>(s.B) * s.NH, ntiles = (s.T + Br - 1) / Br;
  const int64_t bh = blockIdx.x % BH, tile = ntiles - 1 - blockIdx.x / BH;
  const int64_t b = bh / s.NH, h = bh % s.NH, g = h / s.group;
  const int q0 = static_cast<int>(tile) * Br, r0 = q0 + 16 * MW * w;

  const T* k_head = k.row(b, g, 0);
  const T* v_head = v.row(b, g, 0);
  load_rows_async<Br, D>(Qs, q.row(b, h, 0), q.ts, q0, s.T, s.HS);
  load_rows_async<Br, D>(Gs, dout.row(b, h, 0), dout.ts, q0, s.T, s.HS);
  cp_async_commit();
  const int nkt = s.causal ? (min(s.T, q0 + Br) - 1) / Bc + 1 : (s.T + Bc - 1) / Bc;
  const int jf = s.first_key(b, q0) / Bc;
  load_rows_async<Bc, D>(Ks + (jf & 1) * Bc * LD, k_head, k.ts, jf * Bc, s.T, s.HS);
  load_rows_async<Bc, D>(Vs + (jf & 1) * Bc * LD, v_head, v.ts, jf * Bc, s.T, s.HS);
  cp_async_commit();
  // This lane's rows: lse in log2 units and delta (rows past T compute garbage that is never
  // stored; their Q and dO rows are zeros, so it stays finite).
  float lse_r[MW][2], dl_r[MW][2];
  int first[MW][2];  // and first keys (window, document)
#pragma unroll
  for (int mt = 0; mt < MW; ++mt)
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int row = r0 + 16 * mt + gr + 8 * hf;
      lse_r[mt][hf] = row < s.T ? lse[bh * s.T + row] * kLog2e : 0.f;
      dl_r[mt][hf] = row < s.T ? delta[bh * s.T + row] : 0.f;
      first[mt][hf] = s.first_key(b, row);
    }
  const int last_first = s.first_key(b, r0 + 16 * MW - 1);

  Acc acc[MW][D / 8];
#pragma unroll
  for (int mt = 0; mt < MW; ++mt) zero(acc[mt]);
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
      const int reach = r0 + 16 * MW - 1 - k0;
      nch = reach < 0 ? 0 : min(nch, reach / 16 + 1);
    }
    if (nch > 0) {
      const bool masked = !all_seen(s, last_first, r0, 16 * MW, k0, Bc);
      // S = Q K^T and dP = dO V^T for this warp's rows.
      Acc sc[MW][2 * NC], dp[MW][2 * NC];
#pragma unroll
      for (int mt = 0; mt < MW; ++mt) {
        zero(sc[mt]);
        zero(dp[mt]);
      }
      score_products<T, MW, ND, NC, LD>(sc, dp, Qs, Gs, 16 * MW * w, Kt, Vt, 0, nch);
      // dS = P * (dP - delta), P = 2^(scale log2(e) s - lse log2(e)), into sc.
#pragma unroll
      for (int mt = 0; mt < MW; ++mt)
#pragma unroll
        for (int n = 0; n < 2 * NC; ++n)
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int key = k0 + n * 8 + 2 * t4 + (i & 1), row = r0 + 16 * mt + gr + (i < 2 ? 0 : 8);
            const bool ok =
                n / 2 < nch && (!masked || (key < s.T && s.sees_from(first[mt][i >> 1], key, row)));
            const float p = ok ? exp2f(sc[mt][n][i] * scale_log2 - lse_r[mt][i >> 1]) : 0.f;
            sc[mt][n][i] = p * (dp[mt][n][i] - dl_r[mt][i >> 1]);
          }
      // dQ += dS K.
#pragma unroll
      for (int kk = 0; kk < NC; ++kk) {
        if (kk >= nch) continue;
        Frag da[MW];
#pragma unroll
        for (int mt = 0; mt < MW; ++mt) acc_to_a<T>(da[mt], sc[mt][2 * kk], sc[mt][2 * kk + 1]);
#pragma unroll
        for (int n = 0; n < ND; ++n) {
          Frag kb;
          load_b_kn<LD>(kb, Kt, kk * 16, n * 16);
#pragma unroll
          for (int mt = 0; mt < MW; ++mt) mma_pair<T>(acc[mt][2 * n], acc[mt][2 * n + 1], da[mt], kb);
        }
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int mt = 0; mt < MW; ++mt)
    store_rows<T, D>(acc[mt], dq.row(b, h, 0), dq.ts, r0 + 16 * mt, s.T, s.HS, scale, scale);
#endif
}

// dk/dv pass: block = (batch, kv head, 64 MW keys); query tiles of kBr, double-buffered, over
// the group's heads. Works on S^T = K Q^T so that each warp's keys are the rows of everything.
template <int D>
struct DkvLayout {
  static constexpr int kMW = D <= 64 ? TRIDENT_ATTENTION_DKV_MW64 : 1;
  static constexpr int kBc = 64 * kMW, kBr = D > 64 ? 32 : TRIDENT_ATTENTION_DKV_BR64;
  static constexpr int kK = 0, kV = tile_bytes<D>(kBc), kQ = 2 * tile_bytes<D>(kBc);
  static constexpr int kG = kQ + 2 * tile_bytes<D>(kBr), kLse = kG + 2 * tile_bytes<D>(kBr);
  static constexpr int kDelta = kLse + 2 * kBr * 4, kBytes = kDelta + 2 * kBr * 4;
};

template <class T, int D>
__global__ void __launch_bounds__(kThreads)
    tc_dkdv_kernel(View<T> dk, View<T> dv, View<const T> dout, View<const T> q, View<const T> k,
                   View<const T> v, const float* lse, const float* delta, Shape s, float scale,
                   float scale_log2) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using L = DkvLayout<D>;
  constexpr int MW = L::kMW, Br = L::kBr, Bc = L::kBc, LD = D + 8, ND = D / 16, NB = Br / 16;
  unsigned char* smem = dynamic_smem();
  T* Ks = reinterpret_cast<T*>(smem + L::kK);
  T* Vs = reinterpret_cast<T*>(smem + L::kV);
  T* Qs = reinterpret_cast<T*>(smem + L::kQ);               // 2 stages
  T* Gs = reinterpret_cast<T*>(smem + L::kG);               // 2 stages
  float* lse_s = reinterpret_cast<float*>(smem + L::kLse);  // 2 stages, log2 units
  float* delta_s = reinterpret_cast<float*>(smem + L::kDelta);
  const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, gr = lane >> 2, t4 = lane & 3;

  const int NKV = s.NH / s.group;
  const int64_t BG = static_cast<int64_t>(s.B) * NKV;
  const int64_t bg = blockIdx.x % BG, tile = blockIdx.x / BG;  // causal: first tiles cost most
  const int64_t b = bg / NKV, g = bg % NKV;
  const int k0 = static_cast<int>(tile) * Bc;

  load_rows_async<Bc, D>(Ks, k.row(b, g, 0), k.ts, k0, s.T, s.HS);
  load_rows_async<Bc, D>(Vs, v.row(b, g, 0), v.ts, k0, s.T, s.HS);
  // Work items: (query head of the group, query tile that sees these keys).
  // Causal: none before k0; a window or documents: none past the last key's last query.
  const int nq = (s.queries_end(b, min(s.T, k0 + Bc) - 1) + Br - 1) / Br;
  const int i0 = s.causal ? k0 / Br : 0, nqi = nq - i0;
  const int items = s.group * nqi;
  auto issue = [&](int it, int st) {
    const int64_t h = g * s.group + it / nqi;
    const int qb = (i0 + it % nqi) * Br;
    load_rows_async<Br, D>(Qs + st * Br * LD, q.row(b, h, 0), q.ts, qb, s.T, s.HS);
    load_rows_async<Br, D>(Gs + st * Br * LD, dout.row(b, h, 0), dout.ts, qb, s.T, s.HS);
    const int64_t rows0 = (b * s.NH + h) * s.T;
    for (int t = threadIdx.x; t < Br; t += kThreads) {
      const int qi = qb + t;
      lse_s[st * Br + t] = qi < s.T ? lse[rows0 + qi] * kLog2e : 0.f;
      delta_s[st * Br + t] = qi < s.T ? delta[rows0 + qi] : 0.f;
    }
  };
  issue(0, 0);
  cp_async_commit();

  Acc dkf[MW][D / 8], dvf[MW][D / 8];
#pragma unroll
  for (int mt = 0; mt < MW; ++mt) {
    zero(dkf[mt]);
    zero(dvf[mt]);
  }
  const int key_base = k0 + 16 * MW * w;  // this warp's first key
  // One past the last query that sees each of this lane's keys (rows gr, gr + 8 of each m
  // tile), this warp's first key (the earliest end) and its last (the latest).
  int key_end[MW][2];
#pragma unroll
  for (int mt = 0; mt < MW; ++mt) {
    key_end[mt][0] = s.queries_end(b, key_base + 16 * mt + gr);
    key_end[mt][1] = s.queries_end(b, key_base + 16 * mt + gr + 8);
  }
  const int first_end = s.queries_end(b, key_base);
  const int q_end = s.queries_end(b, min(s.T - 1, key_base + 16 * MW - 1));
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
    const int n_last = max(0, min(NB, (q_end - qb + 15) / 16));
    if (n_first < n_last) {
      // The transposed mask test: keys are rows, queries columns.
      const bool masked = !all_seen_t(s, first_end, key_base, 16 * MW, qb, Br);
      // S^T = K Q^T and dP^T = V dO^T, every query chunk of the tile.
      Acc sc[MW][2 * NB], dp[MW][2 * NB];
#pragma unroll
      for (int mt = 0; mt < MW; ++mt) {
        zero(sc[mt]);
        zero(dp[mt]);
      }
      score_products<T, MW, ND, NB, LD>(sc, dp, Ks, Vs, 16 * MW * w, Qt, Gt, n_first, n_last);
      // P^T into sc, dS^T = P^T * (dP^T - delta) into dp.
#pragma unroll
      for (int mt = 0; mt < MW; ++mt)
#pragma unroll
        for (int n = 0; n < 2 * NB; ++n)
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int col = n * 8 + 2 * t4 + (i & 1), qi = qb + col;
            const int key = key_base + 16 * mt + gr + (i < 2 ? 0 : 8);
            const bool ok = n / 2 >= n_first && n / 2 < n_last &&
                            (!masked || (key < s.T && qi < s.T &&
                                         s.seen_until(key_end[mt][i >> 1], key, qi)));
            const float p = ok ? exp2f(sc[mt][n][i] * scale_log2 - lse_t[col]) : 0.f;
            sc[mt][n][i] = p;
            dp[mt][n][i] = p * (dp[mt][n][i] - delta_t[col]);
          }
      // dV += P^T dO, dK += dS^T Q.
#pragma unroll
      for (int kq = 0; kq < NB; ++kq) {
        if (kq < n_first || kq >= n_last) continue;
        Frag pa[MW], da[MW];
#pragma unroll
        for (int mt = 0; mt < MW; ++mt) {
          acc_to_a<T>(pa[mt], sc[mt][2 * kq], sc[mt][2 * kq + 1]);
          acc_to_a<T>(da[mt], dp[mt][2 * kq], dp[mt][2 * kq + 1]);
        }
#pragma unroll
        for (int n = 0; n < ND; ++n) {
          Frag gb, qb_frag;
          load_b_kn<LD>(gb, Gt, kq * 16, n * 16);
          load_b_kn<LD>(qb_frag, Qt, kq * 16, n * 16);
#pragma unroll
          for (int mt = 0; mt < MW; ++mt) {
            mma_pair<T>(dvf[mt][2 * n], dvf[mt][2 * n + 1], pa[mt], gb);
            mma_pair<T>(dkf[mt][2 * n], dkf[mt][2 * n + 1], da[mt], qb_frag);
          }
        }
      }
    }
    __syncthreads();  // this stage is free for the load two items ahead
  }
#pragma unroll
  for (int mt = 0; mt < MW; ++mt) {
    store_rows<T, D>(dkf[mt], dk.row(b, g, 0), dk.ts, key_base + 16 * mt, s.T, s.HS, scale, scale);
    store_rows<T, D>(dvf[mt], dv.row(b, g, 0), dv.ts, key_base + 16 * mt, s.T, s.HS, 1.f, 1.f);
  }
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
    kernel<<<static_cast<unsigned>(blocks), kThreads, FwdLayout<D>::kBytes>>>(
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
      kernel<<<static_cast<unsigned>(blocks), kThreads, DkvLayout<D>::kBytes>>>(
          view_of<T>(dk), view_of<T>(dv), view_of<const T>(dout), view_of<const T>(q), view_of<const T>(k),
          view_of<const T>(v), lse, delta, s, sc, sc_log2);
    }
    {
      auto kernel = tc_dq_kernel<T, D>;
      allow_smem(kernel, DqLayout<D>::kBytes);
      const int64_t blocks = static_cast<int64_t>(s.B) * s.NH * ((s.T + DqLayout<D>::kBr - 1) / DqLayout<D>::kBr);
      kernel<<<static_cast<unsigned>(blocks), kThreads, DqLayout<D>::kBytes>>>(
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
