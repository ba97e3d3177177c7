// Fused scaled-dot-product attention on the CPU, tiled in the style of FlashAttention-2:
//   out[b,h] = softmax(scale * q[b,h] @ k[b,g]^T + mask) @ v[b,g],   g = h / (NH / NKV)
// with the causal mask (-inf where key position > query position) when `causal`, narrowed
// to a sliding window of `window` keys when window > 0 (Note [Sliding window]).
// B batch, NH query heads, NKV key/value heads (grouped-query attention when NKV < NH;
// NKV divides NH), T sequence length (the same for queries and keys), HS head size.
//
// Neither direction materializes the (T, T) score matrix: the forward streams key tiles
// past each query tile with an online softmax and caches only the logsumexp of every score
// row; the backward recomputes each score tile from q, k and that logsumexp
// (attention_forward.cc, attention_backward.cc; tiles and building blocks in
// attention_tile.h). Scratch comes from host_allocator() and is O(tile) per thread, plus
// O(T * HS) per thread for the backward's fused schedule.
//
// Operands are strided views (HeadsView): any strides for the batch, head and time dims,
// unit stride for the HS dim. T is float, double, bf16 or f16; the math runs in acc_t<T>
// (f32, or f64 for double) and every output is rounded once on store.
// Results are bitwise independent of the thread count.
//
// Note [Queries after cached keys]
// Generation with a KV cache runs a few new queries (one per row in a decoding step) against
// every key cached so far: q (B, NH, Tq, HS), k and v (B, NKV, T, HS), query i of row b at key
// position query_start[b] + i, so the causal mask lets it see keys up to that position (and a
// row whose cache is shorter than T sees none of the keys past its own end: they are its
// future). Only the forward takes Tq != T; its query tiles simply start at their positions.
//
// Note [Paged keys and values]
// A KV cache in blocks (vLLM's PagedAttention): sequences of different lengths share one pool
// of fixed-size blocks, each row reading its keys through its own list of blocks, so no row
// reserves the longest row's length and a freed block serves any row next. The kernels read
// keys and values a tile (kBc rows) at a time, so a block holds a whole number of tiles
// (block_tokens % kBc == 0) and a tile never straddles two blocks. A row's blocks before its
// first visited tile (a sliding window's past) are never read, so the cache may have given them
// back (their entries are then -1).
//
// What this does not do: dropout, attention masks other than causal (with or without a
// window and document masks), different query and key lengths, or a value head size different from the
// query/key head size.
//
// Note [Sliding window]
// Mistral's sliding-window attention: query i sees keys j with i - window < j <= i, `window`
// keys counting itself (Hugging Face's sliding_window_overlay, kv_idx > q_idx - window, and
// FlashAttention's window_size = (window - 1, 0)). Older transformers' eager Mistral let
// i - window itself through as well (window + 1 keys); checkpoints trained either way differ
// only at that one key. Every kernel skips the key tiles wholly outside a query tile's window
// and masks the tiles it cuts, so the cost is O(T * window), not O(T^2). A query row may see
// no key at all in a visited tile (the window begins inside the tile): the online softmax
// then shifts by 0, not by its still -inf running max, so that no -inf - -inf appears.
// window >= T is the plain causal mask; window 0 means none.
//
// Note [Document masks]
// A row may hold several documents back to back (packed examples; FlashAttention's varlen
// cu_seqlens, with the documents left in their rows). doc_start[b*T + t] and doc_end[b*T + t]
// are the first position and one past the last of the document holding position t of row b
// (built from position ids by ops::documents_from_positions). Query t then sees keys j with
// doc_start(t) <= j <= t (and inside its window): a document never attends to another. Like
// the window, this only narrows each query's run of keys, and the runs still move right as t
// grows (doc_start is non-decreasing in t), so every kernel skips the tiles wholly outside the
// runs and masks only the tiles a boundary cuts; a packed row costs what its documents cost
// one by one. Causal only.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/dtype.h"

namespace trident::kernels::cpu {

// A (B, heads, T, HS) operand: element (b, h, t, d) is data[b*batch + h*head + t*time + d].
// Paged (block_table set; keys and values only, forward only: Note [Paged keys and values]):
// row b's position t is in block block_table[b * blocks_per_row + t / block_tokens], at
// data[block * batch_stride + h*head + (t % block_tokens)*time + d].
template <class T>
struct HeadsView {
  T* data;
  int64_t batch_stride, head_stride, time_stride;
  const int64_t* block_table = nullptr;
  int64_t blocks_per_row = 0, block_tokens = 0;

  T* row(int64_t b, int64_t h, int64_t t) const {
    if (block_table != nullptr) {
      const int64_t block = block_table[b * blocks_per_row + t / block_tokens];
      return data + block * batch_stride + h * head_stride + (t % block_tokens) * time_stride;
    }
    return data + b * batch_stride + h * head_stride + t * time_stride;
  }
  // Whether row b's position t is held (a paged view's given-back blocks are not).
  bool holds(int64_t b, int64_t t) const {
    return block_table == nullptr || block_table[b * blocks_per_row + t / block_tokens] >= 0;
  }
};

// A paged view's block_tokens must be a multiple of this: the key rows of one tile.
inline constexpr int64_t kAttentionKeyTile = 64;

struct AttentionShape {
  int64_t B, NH, NKV, T, HS;
  bool causal;
  double scale;        // multiplies q . k before the softmax (1/sqrt(HS) in the usual definition)
  int64_t window = 0;  // sliding window (Note [Sliding window]); > 0 only with causal
  // (B, T) each, or null: every row is one document (Note [Document masks]); causal only.
  const int64_t* doc_start = nullptr;
  const int64_t* doc_end = nullptr;

  // The keys query t of row b sees: [first_key(b, t), last_key(t)].
  int64_t first_key(int64_t b, int64_t t) const {
    const int64_t first = window > 0 ? std::max<int64_t>(0, t - window + 1) : 0;
    return doc_start ? std::max(first, doc_start[b * T + t]) : first;
  }
  int64_t last_key(int64_t t) const { return causal ? t : T - 1; }
  // The last query of row b that sees key j.
  int64_t last_query(int64_t b, int64_t j) const {
    const int64_t last = window > 0 ? std::min(T - 1, j + window - 1) : T - 1;
    return doc_end ? std::min(last, doc_end[b * T + j] - 1) : last;
  }
  // Whether some query is masked from a key it would see under the plain causal mask.
  bool narrowed() const { return window > 0 || doc_start != nullptr; }

  // Decoding (forward only; Note [Queries after cached keys]): Tq queries per row against the
  // T keys, query i of row b at key position query_start[b] + i, or (query_start null) the
  // last Tq positions. Tq = 0: T queries, query i at position i.
  int64_t Tq = 0;
  const int64_t* query_start = nullptr;
  int64_t queries() const { return Tq > 0 ? Tq : T; }
  int64_t query_position(int64_t b, int64_t i) const { return (query_start ? query_start[b] : T - queries()) + i; }
};

// Note [Decode-shaped attention]
// A decoding step has one query per row (a few with speculative or chunked steps), and the tiled
// forward pads every query tile to kBr = 64 rows: S^T = K Q^T then costs 64 queries' products and
// exponentials for one query's (a profile of a GPT-2 124M batch-8 decoding step on 2 Emerald
// Rapids cores: the paged attention took 17% of the step). With at most kDecodeQueries queries
// per row (f32, f64), attention_forward runs attention_decode_forward instead: per (batch row, kv
// head), the row's keys are read once, a tile at a time, for all the queries of all the query
// heads sharing the kv head (grouped-query attention's heads in one pass), as the columns of one
// small product, padded to a vector's lanes, not to 64. It gives the tiled path's bits (Note [The
// tiled path's bits] in attention_decode_forward.cc), so cached generation still gives uncached
// generation's tokens.
inline constexpr int64_t kDecodeQueries = 16;

// out (B, NH, T, HS) = attention(q (B, NH, T, HS), k, v (B, NKV, T, HS)).
// lse (B, NH, T), contiguous, cached for backward: logsumexp over keys of each score row
// (scaled and masked), in acc_t<T>. Accumulation semantics: `=` for both.
template <class T>
void attention_forward(HeadsView<T> out, acc_t<T>* lse, HeadsView<const T> q,
                       HeadsView<const T> k, HeadsView<const T> v, const AttentionShape& shape);

// attention_forward with few queries (0 < shape.Tq <= kDecodeQueries; Note [Decode-shaped
// attention]), for f32 and f64: the same contract and bits.
template <class T>
void attention_decode_forward(HeadsView<T> out, T* lse, HeadsView<const T> q, HeadsView<const T> k,
                              HeadsView<const T> v, const AttentionShape& shape);

// Gradients of attention given dout (B, NH, T, HS), the forward's inputs, its output `out`
// and its cached lse (B, NH, T):
//   dq (B, NH, T, HS), dk and dv (B, NKV, T, HS). Accumulation semantics: `=` for all three
// (dk and dv sum over the NH / NKV query heads sharing a key/value head).
template <class T>
void attention_backward(HeadsView<T> dq, HeadsView<T> dk, HeadsView<T> dv,
                        HeadsView<const T> dout, HeadsView<const T> q, HeadsView<const T> k,
                        HeadsView<const T> v, HeadsView<const T> out, const acc_t<T>* lse,
                        const AttentionShape& shape);

}  // namespace trident::kernels::cpu
