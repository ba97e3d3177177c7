// What a layout's blocks keep for their backward, per token of a micro-batch, and the working
// set of a block's backward beyond it: the memory model's activations (planner/memory_model.h)
// from the family's SavedActivation lists (models/model_shapes.h), dense blocks and a mixture
// of experts' sparse ones (Note [The planner's mixture of experts] in block_activations.cc).
// Not here: the head's, the pipeline's and the leaves' terms (memory_model.cc).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "models/model_shapes.h"
#include "planner/layout.h"

namespace trident::planner {

// Bytes per token of a list of saved activations under checkpointing `mode` ("full": the
// first entry only), split as `l` splits them; `routed` scales a mixture of experts' routed
// rows (1: k per token).
double saved_bytes_per_token(const std::vector<models::SavedActivation>& list, const std::string& mode,
                             const Layout& l, int64_t E, double routed = 1.0);

// Bytes per token that blocks [begin, end) keep under `mode` (E: the compute dtype's bytes).
double blocks_bytes_per_token(const models::ModelShapes& shapes, int64_t begin, int64_t end, const std::string& mode,
                              const Layout& l, int64_t E);

// The largest backward working set (Note [The recompute peak]) over the blocks of `chunks`
// ([begin, end) each) for a micro-batch of `tokens` tokens; `widened`: bf16 GEMMs widen their
// operands (RunSpec::widened_bf16).
double blocks_working_set(const models::ModelShapes& shapes, const std::vector<std::pair<int64_t, int64_t>>& chunks,
                          const std::string& mode, const Layout& l, int64_t E, int64_t tokens, bool widened);

}  // namespace trident::planner
