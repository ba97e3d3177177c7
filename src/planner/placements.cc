#include "planner/placements.h"

#include <map>
#include <mutex>
#include <tuple>

#include "parallel/pipeline.h"

namespace trident::planner {

std::vector<parallel::ParamSpec> parameter_specs(const models::ModelShapes& shapes, int64_t tp) {
  std::vector<parallel::ParamSpec> specs;
  for (const models::ParameterShape& p : shapes.parameters) {
    const bool split = p.split_dim >= 0 && !(p.split_heads > 0 && tp > p.split_heads);
    specs.push_back({p.name, Shape(p.shape), p.block,
                     split ? parallel::Placement::shard(p.split_dim, p.split_blocks) : parallel::Placement::replicate(),
                     true});
  }
  return specs;
}

parallel::PlacementTable placements_of(const RunSpec& run, const Layout& l) {
  const parallel::PipelineLayout pipeline = parallel::PipelineLayout::make(
      run.model.n_layer, static_cast<int>(l.pp), static_cast<int>(l.virtual_stages));
  return parallel::PlacementTable::build(
      parameter_specs(run.shapes, l.tp), parallel::MeshShape{l.pp, l.dp, 1, 1, l.tp},
      [&](int64_t block) { return pipeline.stage_of_block(block); }, l.zero_stage, run.compute, run.compute);
}

StageParameters stage_parameters(const parallel::PlacementTable& table, int stage) {
  StageParameters s;
  const int tp = static_cast<int>(table.mesh().tp);
  for (const parallel::ParamPlacement* p : table.on_stage(stage)) {
    s.numels.push_back(p->local_shape(tp, 0).product());
    s.blocks.push_back(p->block);
  }
  return s;
}

struct StageCache {
  std::mutex mu;
  // (fingerprint of the shapes, tp, pp, virtual stages) -> every stage's parameters.
  std::map<std::tuple<uint64_t, int64_t, int64_t, int64_t>, std::vector<StageParameters>> stages;
};

std::shared_ptr<StageCache> new_stage_cache() { return std::make_shared<StageCache>(); }

namespace {

// The run's shapes, hashed (FNV-1a over every dimension, block and split): a RunSpec whose
// shapes were replaced after its first evaluation misses the cache rather than reading stale
// entries.
uint64_t fingerprint(const models::ModelShapes& shapes) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](int64_t v) {
    h ^= static_cast<uint64_t>(v);
    h *= 1099511628211ull;
  };
  for (const models::ParameterShape& p : shapes.parameters) {
    for (int64_t d : p.shape) mix(d);
    mix(p.block);
    mix(p.split_dim);
    mix(p.split_heads);
    mix(p.split_blocks);
    mix(-7);  // a separator
  }
  return h;
}

}  // namespace

const std::vector<StageParameters>& stages_of(const RunSpec& run, const Layout& l) {
  StageCache& cache = *run.stage_cache;
  const auto key = std::make_tuple(fingerprint(run.shapes), l.tp, l.pp, l.virtual_stages);
  std::lock_guard<std::mutex> lock(cache.mu);
  auto it = cache.stages.find(key);
  if (it == cache.stages.end()) {
    const parallel::PlacementTable table = placements_of(run, l);
    std::vector<StageParameters> stages;
    for (int s = 0; s < l.pp; ++s) stages.push_back(stage_parameters(table, s));
    it = cache.stages.emplace(key, std::move(stages)).first;
  }
  return it->second;  // entries are never erased: the reference stays valid
}

}  // namespace trident::planner
