// Fused scaled-dot-product attention (no autograd): validation, layouts and dtype dispatch
// for the tiled kernels in kernels/cpu/attention.h.
//   attention(q, k, v): q (B, NH, T, HS), k and v (B, NKV, T, HS) with NKV dividing NH
//     (grouped-query attention: query head h reads kv head h / (NH / NKV)) ->
//     out (B, NH, T, HS) = softmax(scale * q k^T + causal mask) v, with
//     scale = 1/sqrt(HS) unless given; plus the logsumexp (B, NH, T) of every score row,
//     f32 (f64 for f64 inputs), that attention_backward needs.
//     torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal,
//     scale=scale, enable_gqa=True) computes the same.
//     window > 0 (with causal only): Mistral's sliding window, query i sees keys
//     (i - window, i] (Note [Sliding window] in kernels/cpu/attention.h); 0: no window.
//     documents (with causal only; ops/documents.h): rows of packed documents, a query sees
//     only keys of its own document (Note [Document masks]); null: each row is one document.
// q, k, v may be any strided views (e.g. slices of a (B, T, 3, NH, HS) projection,
// permuted) as long as the HS dim is unit-stride; they are not copied then (otherwise they
// are made contiguous first). Not supported: dropout, arbitrary masks, different query and
// key lengths, a value head size different from HS.
#pragma once

#include <optional>

#include "core/tensor.h"
#include "ops/documents.h"

namespace trident::ops {

// Note [Attention output layout]
// The output's shape is (B, NH, T, HS) either way; the layout picks its memory order.
// kHeadsFirst: contiguous (B, NH, T, HS), what torch returns.
// kTokensFirst: (B, T, NH, HS) in memory, so out.transpose(1, 2) is contiguous and merging
//   the heads back into (B, T, C = NH * HS), which every transformer does next, is a free
//   view instead of a (B, T, C) copy (and one less activation kept alive for backward).
//   The kernel writes rows through strides, so this costs nothing.
enum class AttentionOutputLayout { kHeadsFirst, kTokensFirst };

struct AttentionForward {
  Tensor out;  // (B, NH, T, HS)
  Tensor lse;  // (B, NH, T), contiguous, cached for attention_backward
};

AttentionForward attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                           std::optional<double> scale = std::nullopt,
                           AttentionOutputLayout layout = AttentionOutputLayout::kHeadsFirst,
                           int64_t window = 0, const Documents* documents = nullptr);

// Decoding with a KV cache (Note [Queries after cached keys] in kernels/cpu/attention.h): q
// (B, NH, Tq, HS) against the cached k, v (B, NKV, T, HS), Tq <= T, under the causal mask (and
// the window), query i of row b at key position query_start[b] + i ((B) integers; null: T - Tq
// + i, the last Tq positions). A row whose cache holds fewer than T keys starts its queries
// where its cache ends: the keys past it are never seen. No backward. CPU only for now.
AttentionForward attention_decode(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor* query_start = nullptr, int64_t window = 0,
                                  std::optional<double> scale = std::nullopt,
                                  AttentionOutputLayout layout = AttentionOutputLayout::kHeadsFirst);

// Decoding from a paged KV cache (Note [Paged keys and values] in kernels/cpu/attention.h):
// k_blocks and v_blocks are pools (N, NKV, block_tokens, HS), block_tokens a multiple of
// kernels::cpu::kAttentionKeyTile; row b's key position t is in block table[b][t /
// block_tokens]. T is the longest row's key count; query_start as above (required). A row's
// blocks before its window may be -1 (given back); every block it reads must be in the pool.
struct KvBlocks {
  Tensor table;  // (B, blocks per row) i64 on the host
  int64_t T = 0;
};
AttentionForward attention_decode(const Tensor& q, const Tensor& k_blocks, const Tensor& v_blocks, const KvBlocks& blocks,
                                  const Tensor& query_start, int64_t window = 0,
                                  std::optional<double> scale = std::nullopt,
                                  AttentionOutputLayout layout = AttentionOutputLayout::kHeadsFirst);

struct AttentionGrads {
  Tensor dq;  // (B, NH, T, HS), contiguous
  Tensor dk;  // (B, NKV, T, HS), contiguous
  Tensor dv;  // (B, NKV, T, HS), contiguous
};

// Gradients of attention(q, k, v, causal, scale, window, documents) given the upstream gradient dout
// (B, NH, T, HS), the forward's output `out` and its lse.
AttentionGrads attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k,
                                  const Tensor& v, const Tensor& out, const Tensor& lse,
                                  bool causal, std::optional<double> scale = std::nullopt,
                                  int64_t window = 0, const Documents* documents = nullptr);

}  // namespace trident::ops
