// A tensor-parallel plan as data: for each layer, found by a pattern over module paths, the
// style that splits it over the tensor-parallel ranks (torchtitan's parallelize_module plans,
// Megatron's column- and row-parallel layers). A model family states its plan once
// (models/causal_lm.h); one applier in parallel/tensor_parallel.h carries out any family's.
// The styles themselves (how a split layer computes) live with the applier; a model never
// sees them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace trident::nn {

enum class ParallelStyle {
  // Linear layers (Conv1D, Linear). Column-wise: the output features are split, each rank's
  // whole (an activation fused into the layer applies locally); `fused` > 1 when the output is
  // several matrices side by side (GPT-2's q, k, v in c_attn: 3), each split alike.
  kColumnwise,
  // Row-wise: the input features are split; the ranks' partial products are summed (an
  // all-reduce, or a reduce-scatter over the sequence under sequence parallelism).
  kRowwise,
  // A Linear whose output is `heads` heads, fewer than the ranks (grouped-query attention's
  // k and v with n_kv_heads < tp, as Megatron replicates them): the weight stays whole on
  // every rank, each rank computes the head its query heads read (rank r: head r / (tp / heads))
  // and the ranks' gradients of the weight are summed.
  kColumnwiseReplicated,
  // A Linear LM head (untied): its rows (the vocabulary) are split; its logits are gathered,
  // its loss is vocabulary-parallel cross-entropy (no rank holds the full logits).
  kVocabParallelHead,
  // An Embedding whose rows (the vocabulary) are split: lookups are masked and summed; tied as
  // the LM head, its logits are gathered and its loss is vocabulary-parallel cross-entropy.
  kVocabParallelEmbedding,
  // Norms and learned position embeddings under sequence parallelism: they run on this rank's
  // part of the sequence (their weights replicated, gradients summed over the ranks). Without
  // sequence parallelism the entry does nothing.
  kSequenceParallel,
};
const char* parallel_style_name(ParallelStyle style);

struct ParallelPlanEntry {
  std::string pattern;  // a module path; '*' stands for one path component ("h.*.attn.c_attn")
  ParallelStyle style;
  int64_t fused = 1;    // kColumnwise: matrices side by side in the output features
  int64_t heads = 0;    // kColumnwiseReplicated: the output's heads (dividing the ranks)
};

using ParallelPlan = std::vector<ParallelPlanEntry>;

// Whether `path` matches `pattern` component by component, '*' matching any one component.
bool plan_pattern_matches(std::string_view pattern, std::string_view path);

}  // namespace trident::nn
