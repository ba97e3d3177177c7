// How a mixture of experts' router spreads its rows, as a run measured it: metrics.jsonl's
// per-layer, per-expert routing counts ("moe_layers", train/moe_metrics.h). Under expert
// parallelism the step waits for the ep rank whose experts got the most rows; the planner
// assumes balanced routing unless given these (`trident plan --expert-load FILE`).
//
// Note [Measured expert load]
// An untrained router is not balanced, and a trained one only roughly (the load-balancing loss
// bounds it): tiny-moe's 4 experts, top-2, got 132 to 1,648 of a layer's 4,096 choices in one
// step of train.profile_step, so the busiest of two ep ranks ran 1.13-1.45x the mean rows. The
// other rank waits for it in the next all_to_all_v, so an ep2 step measured 11-16% over its
// balanced prediction (bench/results/2026-12-01-planner-parts-zen4). Rank r of ep holds experts
// [r E / ep, (r + 1) E / ep) (parallel/expert_parallel.h), so from the counts the imbalance of
// any ep follows: per step and layer, the busiest rank's choices over the mean (sum / ep),
// averaged over the file's steps. The counts are each step's, summed over its micro-batches and
// ranks, so a micro-batch's own imbalance (larger, as it holds fewer tokens) is not seen: a
// lower bound. They are counted before a capacity drops rows, so the time model caps the factor
// at moe_capacity_factor (no expert runs more than that x its even share).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "models/model_shapes.h"

namespace trident::planner {

struct ExpertLoad {
  // Per sparse layer (the decoder layer's index): per step, the choices each expert got.
  std::map<int64_t, std::vector<std::vector<int64_t>>> layers;
  bool empty() const { return layers.empty(); }
  // Layer `layer`'s busiest ep rank's rows over the mean, averaged over the steps; 1 for ep = 1,
  // a dense layer or no counts.
  double imbalance(int64_t layer, int64_t ep) const;
  // imbalance() of every layer for every ep dividing `experts`, once: the search asks it for
  // every layout and block, and a long run's file holds thousands of steps.
  void precompute(int64_t experts);

 private:
  double compute(int64_t layer, int64_t ep) const;
  std::map<std::pair<int64_t, int64_t>, double> computed_;  // (layer, ep)
};

// The counts of `file` (a run's metrics.jsonl) for a model of `shapes`, precomputed: an error
// names the file, the line and what is wrong (not JSON, a layer that is not one of the model's
// sparse layers, counts for another number of experts, no counts at all). A last line cut short
// (a run stopped while writing it) is left out.
StatusOr<ExpertLoad> read_expert_load(const std::string& file, const models::ModelShapes& shapes);

}  // namespace trident::planner
