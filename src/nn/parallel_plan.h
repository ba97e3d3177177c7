// A tensor-parallel plan as data: for each layer, found by a pattern over module paths, the
// named style that splits it over the tensor-parallel ranks (torchtitan's parallelize_module
// plans, Megatron's column- and row-parallel layers). A model family states its plan once
// (models/causal_lm.h); one applier in parallel/tensor_parallel.h carries out any family's.
// The styles are an open set: each is registered for the layer types it splits, by (style,
// layer type), where it is implemented (parallel/tp_style_registry.h); this file only names
// the ones the applier's own styles register (parallel/tp_styles.cc), for the families' plans.
// A model never sees how a style computes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace trident::nn {

// The styles of parallel/tp_styles.cc, by name.
namespace tp_style {
// Linear layers (Conv1D, Linear). Column-wise: the output features are split, each rank's
// whole (an activation fused into the layer applies locally); `fused` > 1 when the output is
// several matrices side by side (GPT-2's q, k, v in c_attn: 3), each split alike.
inline constexpr const char* kColumnwise = "columnwise";
// Row-wise: the input features are split; the ranks' partial products are summed (an
// all-reduce, or a reduce-scatter over the sequence under sequence parallelism), then the bias
// added.
inline constexpr const char* kRowwise = "rowwise";
// A Linear whose output is `heads` heads, fewer than the ranks (grouped-query attention's k
// and v with n_kv_heads < tp, as Megatron replicates them): the weight stays whole on every
// rank, each rank computes the head its query heads read (rank r: head r / (tp / heads)) and
// the ranks' gradients of the weight are summed.
inline constexpr const char* kColumnwiseReplicated = "columnwise_replicated";
// The vocabulary (an Embedding's or a Linear LM head's rows) split: lookups are masked and
// summed; as an LM head (the Linear, or the Embedding tied) the logits are gathered and the
// loss is vocabulary-parallel cross-entropy (no rank holds the full logits).
inline constexpr const char* kVocabParallel = "vocab_parallel";
// Norms and learned position embeddings under sequence parallelism: they run on this rank's
// part of the sequence (their weights replicated, gradients summed over the ranks). Without
// sequence parallelism the entry does nothing.
inline constexpr const char* kSequenceParallel = "sequence_parallel";
}  // namespace tp_style

struct ParallelPlanEntry {
  std::string pattern;  // a module path; '*' stands for one path component ("h.*.attn.c_attn")
  std::string style;    // a registered style's name (tp_style::k... for the applier's own)
  int64_t fused = 1;    // column-wise: matrices side by side in the output features
  int64_t heads = 0;    // columnwise_replicated: the output's heads (dividing the ranks)
};

using ParallelPlan = std::vector<ParallelPlanEntry>;

// Whether `path` matches `pattern` component by component, '*' matching any one component.
bool plan_pattern_matches(std::string_view pattern, std::string_view path);

}  // namespace trident::nn
