// The generic SIMT path of the fused attention (design: attention.cu): every dtype and head
// size, f64 math for f64.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "kernels/cuda/attention_common.cuh"

namespace trident::cuda::attention_detail {
namespace {

// ---------------------------------------------------------------------------------------
// Generic SIMT path.
// Query side (forward, dq): a warp owns kGenRows query rows; each key tile (`keys` <= 32 keys,
// one per lane) is staged in shared memory and shared by all warps. Lane j computes the
// scores of key j against the warp's rows (loading k_j[d] once for all rows); the row
// statistics are warp reductions; then lanes switch to owning head dims for the sums over
// keys (P V, dS K), with the row accumulators in shared memory so any HS fits.
// Key side (dk, dv): a block owns up to 128 keys, one per thread, with its dk, dv rows in
// shared memory, and streams the query rows that see them in chunks of kGenChunk.
// Rows of K/V/dK/dV tiles read by one lane each use an odd stride (ldk) so that the 32 lanes
// hit 32 different banks. Tile sizes shrink (fewer warps, then fewer keys) when HS is too
// large for shared memory.
constexpr int kGenRows = 8;
constexpr int kGenChunk = 16;

struct GenConfig {
  int warps, keys, ldk;
  size_t smem;
};

[[noreturn]] void head_size_too_large(const char* what, int HS) {
  std::fprintf(stderr, "trident: CUDA %s: head size %d does not fit in shared memory\n", what, HS);
  std::abort();
}

// buffers: (rows, HS) arrays per block (forward: q and the output accumulator; dq: q, dout
// and the dq accumulator).
template <class A>
GenConfig query_side_config(int HS, int buffers, int max_smem, const char* what) {
  const int ldk = HS | 1;
  auto bytes = [&](int warps, int keys) {
    return sizeof(A) * (static_cast<size_t>(buffers) * warps * kGenRows * HS +
                        2 * static_cast<size_t>(keys) * ldk + static_cast<size_t>(warps) * kGenRows * 32);
  };
  for (int warps = 4; warps >= 1; warps /= 2)
    if (bytes(warps, 32) <= static_cast<size_t>(max_smem)) return {warps, 32, ldk, bytes(warps, 32)};
  for (int keys = 16; keys >= 1; keys /= 2)
    if (bytes(1, keys) <= static_cast<size_t>(max_smem)) return {1, keys, ldk, bytes(1, keys)};
  head_size_too_large(what, HS);
}

template <class A>
GenConfig key_side_config(int HS, int max_smem) {
  const int ldk = HS | 1;
  auto bytes = [&](int keys) {
    return sizeof(A) * (4 * static_cast<size_t>(keys) * ldk + 2 * static_cast<size_t>(kGenChunk) * HS +
                        2 * static_cast<size_t>(kGenChunk));
  };
  for (int keys = 128; keys >= 1; keys /= 2)
    if (bytes(keys) <= static_cast<size_t>(max_smem))
      return {keys >= 32 ? keys / 32 : 1, keys, ldk, bytes(keys)};
  head_size_too_large("attention backward", HS);
}

// Rows [row0, row0 + rows) of a head into dst (rows, HS) as A; rows past T are zero.
template <class T, class A>
__device__ __forceinline__ void gen_load_rows(A* dst, int ld, const View<const T>& x, int64_t b,
                                              int64_t h, int row0, int rows, const Shape& s) {
  for (int e = threadIdx.x; e < rows * s.HS; e += blockDim.x) {
    const int r = e / s.HS, d = e % s.HS, t = row0 + r;
    dst[r * ld + d] = t < s.T ? to_acc(x.row(b, h, t)[d]) : A(0);
  }
}

// Query-side rows for causal masking: the keys a block of rows [q0, q0 + rows) can see.
__device__ __forceinline__ int keys_seen(const Shape& s, int q0, int rows) {
  return s.causal ? min(s.T, q0 + rows) : s.T;
}

template <class T, int R>
__global__ void gen_forward_kernel(View<T> out, acc_t<T>* lse, View<const T> q, View<const T> k,
                                   View<const T> v, Shape s, acc_t<T> scale, int keys, int ldk) {
  using A = acc_t<T>;
  const int W = blockDim.x >> 5, w = threadIdx.x >> 5, lane = threadIdx.x & 31, Br = W * R;
  const int64_t BH = static_cast<int64_t>(s.B) * s.NH, ntiles = (s.T + Br - 1) / Br;
  const int64_t bh = blockIdx.x % BH, tile = ntiles - 1 - blockIdx.x / BH;  // longest first
  const int64_t b = bh / s.NH, h = bh % s.NH, g = h / s.group;
  const int q0 = static_cast<int>(tile) * Br, HS = s.HS;

  A* Qs = reinterpret_cast<A*>(dynamic_smem());  // (Br, HS)
  A* Os = Qs + Br * HS;                          // (Br, HS) unnormalized output
  A* Ks = Os + Br * HS;                          // (keys, ldk)
  A* Vs = Ks + keys * ldk;                       // (keys, ldk)
  A* Ps = Vs + keys * ldk;                       // (W * R, 32) probabilities of the tile
  gen_load_rows(Qs, HS, q, b, h, q0, Br, s);
  for (int e = threadIdx.x; e < Br * HS; e += blockDim.x) Os[e] = A(0);

  A m[R], l[R];
  int first[R];  // each row's first key (window, document)
#pragma unroll
  for (int r = 0; r < R; ++r) {
    m[r] = minus_inf<A>(), l[r] = A(0);
    first[r] = s.first_key(b, q0 + w * R + r);
  }
  const A* q_rows = Qs + w * R * HS;
  A* o_rows = Os + w * R * HS;
  A* p_rows = Ps + w * R * 32;
  const int kend = keys_seen(s, q0, Br);
  // From the block's first query's first key: the later rows' start no earlier.
  for (int k0 = s.first_key(b, q0); k0 < kend; k0 += keys) {
    __syncthreads();  // the previous tile's K, V reads are done (and Qs, Os written)
    for (int e = threadIdx.x; e < keys * HS; e += blockDim.x) {
      const int j = e / HS, d = e % HS, key = k0 + j;
      Ks[j * ldk + d] = key < s.T ? to_acc(k.row(b, g, key)[d]) : A(0);
      Vs[j * ldk + d] = key < s.T ? to_acc(v.row(b, g, key)[d]) : A(0);
    }
    __syncthreads();
    const int key = k0 + lane;
    A sc[R];
#pragma unroll
    for (int r = 0; r < R; ++r) sc[r] = A(0);
    if (lane < keys) {
      const A* kr = Ks + lane * ldk;
      for (int d = 0; d < HS; ++d) {
        const A kd = kr[d];
#pragma unroll
        for (int r = 0; r < R; ++r) sc[r] += q_rows[r * HS + d] * kd;
      }
    }
    A alpha[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int qi = q0 + w * R + r;
      const bool ok = lane < keys && key < s.T && s.sees_from(first[r], key, qi);
      const A x = ok ? sc[r] * scale : minus_inf<A>();
      const A m_new = max(m[r], warp_max(x));
      // A row that has seen no key yet (its window or document starts past this tile's keys)
      // keeps m = -inf; shift by 0 then (no -inf - -inf).
      const A m_use = m_new == minus_inf<A>() ? A(0) : m_new;
      const A p = ok ? exp_acc(x - m_use) : A(0);
      alpha[r] = exp_acc(m[r] - m_use);
      l[r] = alpha[r] * l[r] + warp_sum(p);
      m[r] = m_new;
      p_rows[r * 32 + lane] = p;
    }
    __syncwarp();
    const int nk = min(keys, s.T - k0);
    for (int d = lane; d < HS; d += 32) {
      A o[R];
#pragma unroll
      for (int r = 0; r < R; ++r) o[r] = o_rows[r * HS + d] * alpha[r];
      for (int j = 0; j < nk; ++j) {
        const A vd = Vs[j * ldk + d];
#pragma unroll
        for (int r = 0; r < R; ++r) o[r] += p_rows[r * 32 + j] * vd;
      }
#pragma unroll
      for (int r = 0; r < R; ++r) o_rows[r * HS + d] = o[r];
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int qi = q0 + w * R + r;
    if (qi >= s.T) continue;
    const A inv_l = A(1) / l[r];
    T* dst = out.row(b, h, qi);
    for (int d = lane; d < HS; d += 32) dst[d] = from_acc<T>(o_rows[r * HS + d] * inv_l);
    if (lane == 0) lse[bh * s.T + qi] = m[r] + log_acc(l[r]);
  }
}

template <class T, int R>
__global__ void gen_dq_kernel(View<T> dq, View<const T> dout, View<const T> q, View<const T> k,
                              View<const T> v, const acc_t<T>* lse, const acc_t<T>* delta, Shape s,
                              acc_t<T> scale, int keys, int ldk) {
  using A = acc_t<T>;
  const int W = blockDim.x >> 5, w = threadIdx.x >> 5, lane = threadIdx.x & 31, Br = W * R;
  const int64_t BH = static_cast<int64_t>(s.B) * s.NH, ntiles = (s.T + Br - 1) / Br;
  const int64_t bh = blockIdx.x % BH, tile = ntiles - 1 - blockIdx.x / BH;
  const int64_t b = bh / s.NH, h = bh % s.NH, g = h / s.group;
  const int q0 = static_cast<int>(tile) * Br, HS = s.HS;

  A* Qs = reinterpret_cast<A*>(dynamic_smem());  // (Br, HS)
  A* Gs = Qs + Br * HS;                          // (Br, HS) dout
  A* DQs = Gs + Br * HS;                         // (Br, HS) dq accumulator
  A* Ks = DQs + Br * HS;                         // (keys, ldk)
  A* Vs = Ks + keys * ldk;                       // (keys, ldk)
  A* Ss = Vs + keys * ldk;                       // (W * R, 32) dS of the tile
  gen_load_rows(Qs, HS, q, b, h, q0, Br, s);
  gen_load_rows(Gs, HS, dout, b, h, q0, Br, s);
  for (int e = threadIdx.x; e < Br * HS; e += blockDim.x) DQs[e] = A(0);

  A row_lse[R], row_delta[R];
  int first[R];  // each row's first key (window, document)
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int qi = q0 + w * R + r;
    row_lse[r] = qi < s.T ? lse[bh * s.T + qi] : A(0);
    row_delta[r] = qi < s.T ? delta[bh * s.T + qi] : A(0);
    first[r] = s.first_key(b, qi);
  }
  const A* q_rows = Qs + w * R * HS;
  const A* g_rows = Gs + w * R * HS;
  A* dq_rows = DQs + w * R * HS;
  A* ds_rows = Ss + w * R * 32;
  const int kend = keys_seen(s, q0, Br);
  for (int k0 = s.first_key(b, q0); k0 < kend; k0 += keys) {
    __syncthreads();
    for (int e = threadIdx.x; e < keys * HS; e += blockDim.x) {
      const int j = e / HS, d = e % HS, key = k0 + j;
      Ks[j * ldk + d] = key < s.T ? to_acc(k.row(b, g, key)[d]) : A(0);
      Vs[j * ldk + d] = key < s.T ? to_acc(v.row(b, g, key)[d]) : A(0);
    }
    __syncthreads();
    const int key = k0 + lane;
    A sc[R], dp[R];
#pragma unroll
    for (int r = 0; r < R; ++r) sc[r] = A(0), dp[r] = A(0);
    if (lane < keys) {
      const A* kr = Ks + lane * ldk;
      const A* vr = Vs + lane * ldk;
      for (int d = 0; d < HS; ++d) {
        const A kd = kr[d], vd = vr[d];
#pragma unroll
        for (int r = 0; r < R; ++r) {
          sc[r] += q_rows[r * HS + d] * kd;
          dp[r] += g_rows[r * HS + d] * vd;
        }
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int qi = q0 + w * R + r;
      const bool ok = lane < keys && key < s.T && qi < s.T && s.sees_from(first[r], key, qi);
      const A p = ok ? exp_acc(sc[r] * scale - row_lse[r]) : A(0);
      ds_rows[r * 32 + lane] = p * (dp[r] - row_delta[r]);
    }
    __syncwarp();
    const int nk = min(keys, s.T - k0);
    for (int d = lane; d < HS; d += 32) {
      A a[R];
#pragma unroll
      for (int r = 0; r < R; ++r) a[r] = dq_rows[r * HS + d];
      for (int j = 0; j < nk; ++j) {
        const A kd = Ks[j * ldk + d];
#pragma unroll
        for (int r = 0; r < R; ++r) a[r] += ds_rows[r * 32 + j] * kd;
      }
#pragma unroll
      for (int r = 0; r < R; ++r) dq_rows[r * HS + d] = a[r];
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int qi = q0 + w * R + r;
    if (qi >= s.T) continue;
    T* dst = dq.row(b, h, qi);
    for (int d = lane; d < HS; d += 32) dst[d] = from_acc<T>(scale * dq_rows[r * HS + d]);
  }
}

template <class T, int R>
__global__ void gen_dkdv_kernel(View<T> dk, View<T> dv, View<const T> dout, View<const T> q,
                                View<const T> k, View<const T> v, const acc_t<T>* lse,
                                const acc_t<T>* delta, Shape s, acc_t<T> scale, int keys, int ldk) {
  using A = acc_t<T>;
  const int NKV = s.NH / s.group, HS = s.HS;
  const int64_t BG = static_cast<int64_t>(s.B) * NKV;
  // Under the causal mask the first key tiles are seen by the most queries: they go first.
  const int64_t bg = blockIdx.x % BG, tile = blockIdx.x / BG;
  const int64_t b = bg / NKV, g = bg % NKV;
  const int k0 = static_cast<int>(tile) * keys;

  A* Ks = reinterpret_cast<A*>(dynamic_smem());  // (keys, ldk)
  A* Vs = Ks + keys * ldk;
  A* dKs = Vs + keys * ldk;
  A* dVs = dKs + keys * ldk;
  A* Qs = dVs + keys * ldk;  // (R, HS) query chunk
  A* Gs = Qs + R * HS;       // (R, HS) dout chunk
  A* Ls = Gs + R * HS;       // (R) lse
  A* Ds = Ls + R;            // (R) delta
  for (int e = threadIdx.x; e < keys * HS; e += blockDim.x) {
    const int j = e / HS, d = e % HS, key = k0 + j;
    Ks[j * ldk + d] = key < s.T ? to_acc(k.row(b, g, key)[d]) : A(0);
    Vs[j * ldk + d] = key < s.T ? to_acc(v.row(b, g, key)[d]) : A(0);
    dKs[j * ldk + d] = A(0);
    dVs[j * ldk + d] = A(0);
  }
  const int j = threadIdx.x, key = k0 + j;
  const bool active = j < keys && key < s.T;
  const int key_end = s.queries_end(b, key);  // one past the last query that sees this key
  // Causal: queries before k0 see none of these keys; with a window or documents, nor do
  // those past the last key's last query (the latest of the block's keys).
  const int qend = s.queries_end(b, min(s.T, k0 + keys) - 1);
  for (int hh = 0; hh < s.group; ++hh) {
    const int64_t h = g * s.group + hh, rows0 = (b * s.NH + h) * s.T;
    for (int qs = s.causal ? k0 : 0; qs < qend; qs += R) {
      __syncthreads();  // the previous chunk is consumed (and the key tiles are stored)
      gen_load_rows(Qs, HS, q, b, h, qs, R, s);
      gen_load_rows(Gs, HS, dout, b, h, qs, R, s);
      if (threadIdx.x < R) {
        const int qi = qs + threadIdx.x;
        Ls[threadIdx.x] = qi < s.T ? lse[rows0 + qi] : A(0);
        Ds[threadIdx.x] = qi < s.T ? delta[rows0 + qi] : A(0);
      }
      __syncthreads();
      if (!active) continue;
      A sc[R], dp[R];
#pragma unroll
      for (int r = 0; r < R; ++r) sc[r] = A(0), dp[r] = A(0);
      const A* kr = Ks + j * ldk;
      const A* vr = Vs + j * ldk;
      for (int d = 0; d < HS; ++d) {
        const A kd = kr[d], vd = vr[d];
#pragma unroll
        for (int r = 0; r < R; ++r) {
          sc[r] += Qs[r * HS + d] * kd;
          dp[r] += Gs[r * HS + d] * vd;
        }
      }
      A p[R], ds[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int qi = qs + r;
        const bool ok = qi < s.T && s.seen_until(key_end, key, qi);
        p[r] = ok ? exp_acc(sc[r] * scale - Ls[r]) : A(0);
        ds[r] = p[r] * (dp[r] - Ds[r]);
      }
      A* dkr = dKs + j * ldk;
      A* dvr = dVs + j * ldk;
      for (int d = 0; d < HS; ++d) {
        A a = dvr[d], c = dkr[d];
#pragma unroll
        for (int r = 0; r < R; ++r) {
          a += p[r] * Gs[r * HS + d];
          c += ds[r] * Qs[r * HS + d];
        }
        dvr[d] = a;
        dkr[d] = c;
      }
    }
  }
  __syncthreads();
  // Coalesced stores: consecutive threads take consecutive head dims.
  for (int e = threadIdx.x; e < keys * HS; e += blockDim.x) {
    const int jj = e / HS, d = e % HS, kk = k0 + jj;
    if (kk >= s.T) continue;
    dk.row(b, g, kk)[d] = from_acc<T>(scale * dKs[jj * ldk + d]);
    dv.row(b, g, kk)[d] = from_acc<T>(dVs[jj * ldk + d]);
  }
}

template <class T>
void gen_forward(Heads out, void* lse, Heads q, Heads k, Heads v, const Shape& s, double scale,
                 int max_smem) {
  using A = acc_t<T>;
  const GenConfig c = query_side_config<A>(s.HS, 2, max_smem, "attention forward");
  auto kernel = gen_forward_kernel<T, kGenRows>;
  allow_smem(kernel, c.smem);
  const int64_t rows = static_cast<int64_t>(c.warps) * kGenRows;
  const int64_t blocks = static_cast<int64_t>(s.B) * s.NH * ((s.T + rows - 1) / rows);
  kernel<<<static_cast<unsigned>(blocks), 32 * c.warps, c.smem>>>(
      view_of<T>(out), static_cast<A*>(lse), view_of<const T>(q), view_of<const T>(k), view_of<const T>(v),
      s, static_cast<A>(scale), c.keys, c.ldk);
}

template <class T>
void gen_backward(Heads dq, Heads dk, Heads dv, Heads dout, Heads q, Heads k, Heads v,
                  const acc_t<T>* lse, const acc_t<T>* delta, const Shape& s, double scale, int max_smem) {
  using A = acc_t<T>;
  const A sc = static_cast<A>(scale);
  {
    const GenConfig c = key_side_config<A>(s.HS, max_smem);
    auto kernel = gen_dkdv_kernel<T, kGenChunk>;
    allow_smem(kernel, c.smem);
    const int64_t blocks = static_cast<int64_t>(s.B) * (s.NH / s.group) * ((s.T + c.keys - 1) / c.keys);
    kernel<<<static_cast<unsigned>(blocks), 32 * c.warps, c.smem>>>(
        view_of<T>(dk), view_of<T>(dv), view_of<const T>(dout), view_of<const T>(q), view_of<const T>(k),
        view_of<const T>(v), lse, delta, s, sc, c.keys, c.ldk);
  }
  {
    const GenConfig c = query_side_config<A>(s.HS, 3, max_smem, "attention backward");
    auto kernel = gen_dq_kernel<T, kGenRows>;
    allow_smem(kernel, c.smem);
    const int64_t rows = static_cast<int64_t>(c.warps) * kGenRows;
    const int64_t blocks = static_cast<int64_t>(s.B) * s.NH * ((s.T + rows - 1) / rows);
    kernel<<<static_cast<unsigned>(blocks), 32 * c.warps, c.smem>>>(
        view_of<T>(dq), view_of<const T>(dout), view_of<const T>(q), view_of<const T>(k), view_of<const T>(v),
        lse, delta, s, sc, c.keys, c.ldk);
  }
}

}  // namespace

void generic_forward(int dtype, Heads out, void* lse, Heads q, Heads k, Heads v, const Shape& s, double scale,
                     int max_smem) {
  dispatch_floating(dtype, "attention forward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    gen_forward<T>(out, lse, q, k, v, s, scale, max_smem);
  });
}

void generic_backward(int dtype, Heads dq, Heads dk, Heads dv, Heads dout, Heads q, Heads k, Heads v,
                      const void* lse, const void* delta, const Shape& s, double scale, int max_smem) {
  dispatch_floating(dtype, "attention backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    gen_backward<T>(dq, dk, dv, dout, q, k, v, static_cast<const A*>(lse), static_cast<const A*>(delta), s, scale,
                    max_smem);
  });
}

}  // namespace trident::cuda::attention_detail
