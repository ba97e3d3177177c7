// Per-layer metrics of mixture-of-experts training: each sparse layer's tokens per expert and
// dropped choices over a step, and under expert parallelism its exchanges' bytes and seconds,
// from the per-layer sums the layers record (nn/aux_layer_sums.h), combined over ranks. The
// trainer fills StepMetrics::moe_layers with them; metrics.jsonl, Prometheus, TensorBoard and
// `trident report` show them.
//
// Note [Tokens per expert]
// Q: What does a layer's `tokens[e]` count?
// A: The routing choices (token, expert) that went to expert e in the step, before the
// capacity dropped any (Routing::routed: what the router asked for, as the load-balancing loss
// sees it), over every micro-batch of the step and every rank that routes its own tokens
// (data-parallel replicas, expert-parallel and context-parallel ranks: each routes other
// rows). So sum_e tokens[e] = tokens per step x num_experts_per_tok for every layer, and
// `dropped` is how many of those choices the capacity dropped (0 when dropless). A pipeline
// stage records only its own layers; the layers come together by index. A checkpointed
// region's rerun routes again but is not counted again (AuxOutputs::add_layer_sums). Tensor
// parallelism would repeat the same routing on each peer, so only tp rank 0's sums are sent
// (mixture-of-experts models refuse parallel.tp today).
// `aux_loss` and `z_loss` are the layer's load-balancing and z losses (without their
// coefficients), the mean over the step's micro-batches and the ranks, as "aux"'s means are
// over the layers too.
// `all_to_all_bytes` (expert parallelism) is the bytes of rows the layer's exchanges sent from
// one rank to another, forward and backward, summed over the ranks; `all_to_all_s` the seconds
// a rank spent in them, the mean over the ranks (Note [Exchange cost per layer] in
// parallel/expert_parallel.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nn/aux_layer_sums.h"

namespace trident::train {

struct MoeLayerMetrics {
  int64_t layer = 0;            // the decoder layer's index ("layers.N.")
  std::vector<int64_t> tokens;  // per expert: the step's routing choices before dropping
  int64_t dropped = 0;          // choices the capacity dropped
  std::optional<double> aux_loss, z_loss;     // the layer's router losses (mean); none: not recorded
  std::optional<int64_t> all_to_all_bytes;   // expert parallelism only
  std::optional<double> all_to_all_seconds;  // ditto
};

// A rank's per-layer sums (AuxOutputs::take_layer_sums()) as text for the other ranks: a JSON
// array of [layer, name, [values...]] (doubles written to read back exactly).
std::string layer_sums_to_json(const nn::AuxLayerSums& sums);

// The layers' metrics from every rank's layer_sums_to_json text (Note [Tokens per expert]):
// sums added over the ranks, seconds averaged over the ranks that have them; ordered by layer.
// Throws trident::Error on text it cannot read or sums of different lengths.
std::vector<MoeLayerMetrics> merge_moe_layers(const std::vector<std::string>& per_rank);

// metrics.jsonl's "moe_layers" value: [{"layer": L, "tokens": [...], "dropped": n, "aux_loss": a,
// "z_loss": z, "all_to_all_bytes": b, "all_to_all_s": s}, ...] (the losses where recorded, the
// last two under expert parallelism).
std::string moe_layers_to_json(const std::vector<MoeLayerMetrics>& layers);

}  // namespace trident::train
