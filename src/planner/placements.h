// The placement table the trainer would build for a run under a layout (parallel/placement.h),
// built from the family's shapes (models/model_shapes.h) instead of a model: the planner's
// memory and time models read each stage's parameters and their tensor-parallel shares from
// it, so they count what the trainer holds. tests/planner/placements_test checks it against
// the table parallelize() builds.
#pragma once

#include <cstdint>
#include <vector>

#include "parallel/placement.h"
#include "planner/layout.h"
#include "planner/run_spec.h"

namespace trident::planner {

// The run's parameters as the table's specs for `tp` ranks, trainable as run.holding says: a
// family's split_heads past tp replicates the tensor (every rank holds it whole and uses its
// head's rows).
std::vector<parallel::ParamSpec> parameter_specs(const RunSpec& run, int64_t tp);

// The table of `run` under `l` (frozen parameters stored in the compute dtype, as parallelize()
// stores them).
parallel::PlacementTable placements_of(const RunSpec& run, const Layout& l);

// What pipeline stage `stage` holds on its tensor-parallel rank 0 (the largest share: uneven
// splits give the first ranks more) and expert-parallel rank 0 (every ep rank holds as many
// experts): each trained parameter's elements, in model order, their blocks
// (CausalLM::block_of) and whether each is an expert's placed by expert parallelism (its
// gradient reduced and ZeRO-sharded over dp alone); and the bytes of its frozen ones (the
// compute dtype's, or NF4's: Nf4Weight::bytes_for their shards).
struct StageParameters {
  std::vector<int64_t> numels;
  std::vector<int64_t> blocks;
  std::vector<bool> expert;
  int64_t frozen_bytes = 0;
};
StageParameters stage_parameters(const RunSpec& run, const parallel::PlacementTable& table, int stage);
// Every stage's, of placements_of(run, l): what the memory and time models read, cached per
// (tp, pp, virtual stages, ep) and the run's shapes in run.stage_cache, since a search evaluates
// thousands of layouts that share them (building the table for each made `trident plan` 6x
// slower). Thread-safe.
const std::vector<StageParameters>& stages_of(const RunSpec& run, const Layout& l);

}  // namespace trident::planner
