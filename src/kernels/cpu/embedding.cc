#include "kernels/cpu/embedding.h"

#include <algorithm>
#include <cstring>

#include "core/allocator.h"
#include "core/dtype.h"
#include "core/parallel.h"

namespace trident::kernels::cpu {

template <class T, class I>
void embedding_forward(T* out, const T* weight, const I* indices, int64_t N, int64_t C) {
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(C, 1));
  parallel_for(0, N, grain, [&](int64_t nb, int64_t ne) {
    for (int64_t n = nb; n < ne; ++n)
      std::copy_n(weight + static_cast<int64_t>(indices[n]) * C, C, out + n * C);
  });
}

// Note [Deterministic embedding backward]
// The gradient of a weight row is the sum of the output gradients of every token that looked
// it up. A parallel scatter-add (threads adding token rows into grad_weight as they come)
// would race on repeated indices, and summing in thread order would make the bits depend on
// the thread count. Two deterministic schemes were considered:
//   (a) column blocks: zero grad_weight, then each thread owns a block of columns and adds
//       every token's row segment into it, tokens in order;
//   (b) sort by index: a stable counting sort lists the token positions of each row in
//       increasing order (O(N + V)); then each used row is an independent work item, summed
//       in acc_t<T> from zero over its tokens and stored once.
// (b) is used. One thread sums a row, in increasing token order and starting from zero, so
// the bits equal a sequential scatter-add into zeros, for any thread count. bf16/f16 rows
// are rounded once, where (a) would round after every add or need a (V, C) float scratch
// buffer (154 MB for GPT-2); and the work splits by tokens (Note [Balancing the embedding
// backward]) where (a) has only C / block items (12 for C = 768 and 64-column blocks).
//
// GPT-2 small (V = 50257, C = 768, N = 8192 tokens) is bound by writing the 154 MB f32
// gradient, most of whose rows no token uses. So the whole buffer is zeroed first by one
// flat memset (glibc streams a fill this large past the cache), then only used rows are
// written. Zeroing row by row instead, as part of the per-row work, reads every line before
// writing it and made (b) about twice as slow. Measured on the 2-core development VM (AMD
// EPYC, 1 thread, minimum CPU time of 60 interleaved runs, uniform tokens, f32): the memset
// alone 3.5 ms, (b) 8.3 ms, (a) 7.8 ms; (b) on bf16 6.9 ms. (a)'s small f32 edge does not
// outweigh its bf16 rounding and its limited parallelism.
//
// Note [Balancing the embedding backward]
// Token frequencies are skewed (the few most common tokens are a large share of any text,
// and BPE vocabularies give them small ids), so splitting the used rows into equal counts
// would hand one thread most of the tokens. Parts are instead cut at row boundaries so that
// each holds about the same number of tokens; the cut only decides which thread sums a row,
// never how, so it cannot change the result.

template <class T, class I>
void embedding_backward(T* grad_weight, const T* grad_out, const I* indices, int64_t N, int64_t V,
                        int64_t C) {
  using Acc = acc_t<T>;
  // +0.0 is all-zero bits in every floating type, so memset writes zeros.
  parallel_for(0, V * C, 1 << 18, [&](int64_t b, int64_t e) {
    std::memset(static_cast<void*>(grad_weight + b), 0, static_cast<size_t>(e - b) * sizeof(T));
  });
  if (N == 0) return;

  // Stable counting sort: the tokens of row v are order[row_begin[v] .. row_begin[v + 1]).
  DataPtr scratch = host_allocator().allocate(
      static_cast<size_t>(2 * V + 1 + 2 * N) * sizeof(int64_t), MemoryCategory::kOther);
  int64_t* row_begin = static_cast<int64_t*>(scratch.get());  // (V + 1)
  int64_t* next_slot = row_begin + V + 1;                     // (V)
  int64_t* order = next_slot + V;                             // (N)
  int64_t* used_rows = order + N;                             // (at most N) rows with tokens
  std::fill_n(row_begin, V + 1, 0);
  for (int64_t n = 0; n < N; ++n) ++row_begin[static_cast<int64_t>(indices[n]) + 1];
  for (int64_t v = 0; v < V; ++v) row_begin[v + 1] += row_begin[v];
  std::copy_n(row_begin, V, next_slot);
  for (int64_t n = 0; n < N; ++n) order[next_slot[static_cast<int64_t>(indices[n])]++] = n;
  int64_t num_used = 0;
  for (int64_t v = 0; v < V; ++v)
    if (row_begin[v + 1] > row_begin[v]) used_rows[num_used++] = v;

  // Parts of about equal token counts (Note [Balancing the embedding backward]): part k
  // starts at the first used row whose tokens start at or after k * N / parts.
  constexpr int64_t kWorkPerPart = 16384;  // gradient elements read per part, about
  const int64_t parts = std::clamp<int64_t>(N * C / kWorkPerPart, 1, num_used);
  auto part_begin = [&](int64_t k) {
    const int64_t first_token = k * N / parts;
    int64_t lo = 0, hi = num_used;  // binary search over the increasing row_begin[used_rows[u]]
    while (lo < hi) {
      const int64_t mid = (lo + hi) / 2;
      if (row_begin[used_rows[mid]] < first_token)
        lo = mid + 1;
      else
        hi = mid;
    }
    return lo;
  };
  constexpr int64_t kBlock = 256;  // columns summed at once, in L1
  parallel_for(0, parts, 1, [&](int64_t kb, int64_t ke) {
    Acc acc[kBlock];
    for (int64_t u = part_begin(kb), u_end = part_begin(ke); u < u_end; ++u) {
      const int64_t v = used_rows[u], first = row_begin[v], last = row_begin[v + 1];
      T* dst = grad_weight + v * C;
      for (int64_t c0 = 0; c0 < C; c0 += kBlock) {
        const int64_t width = std::min(kBlock, C - c0);
        for (int64_t j = 0; j < width; ++j) acc[j] = Acc{0};
        for (int64_t t = first; t < last - 1; ++t) {
          const T* src = grad_out + order[t] * C + c0;
          for (int64_t j = 0; j < width; ++j) acc[j] += static_cast<Acc>(src[j]);
        }
        // The last token's add is fused with the store (which also keeps the compiler from
        // turning a plain f32 store loop into a memcpy call per block).
        const T* src = grad_out + order[last - 1] * C + c0;
        for (int64_t j = 0; j < width; ++j)
          dst[c0 + j] = static_cast<T>(acc[j] + static_cast<Acc>(src[j]));
      }
    }
  });
}

#define TRI_INSTANTIATE(T, I)                                                      \
  template void embedding_forward<T, I>(T*, const T*, const I*, int64_t, int64_t); \
  template void embedding_backward<T, I>(T*, const T*, const I*, int64_t, int64_t, int64_t);
#define TRI_INSTANTIATE_INDICES(T) \
  TRI_INSTANTIATE(T, int32_t)      \
  TRI_INSTANTIATE(T, int64_t)      \
  TRI_INSTANTIATE(T, uint16_t)
TRI_FOR_EACH_FLOATING_TYPE(TRI_INSTANTIATE_INDICES)
#undef TRI_INSTANTIATE_INDICES
#undef TRI_INSTANTIATE

}  // namespace trident::kernels::cpu
