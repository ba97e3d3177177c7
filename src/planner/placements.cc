#include "planner/placements.h"

#include <map>
#include <mutex>
#include <tuple>

#include "parallel/pipeline.h"
#include "quantization/nf4.h"

namespace trident::planner {

std::vector<parallel::ParamSpec> parameter_specs(const RunSpec& run, int64_t tp) {
  std::vector<parallel::ParamSpec> specs;
  for (size_t i = 0; i < run.shapes.parameters.size(); ++i) {
    const models::ParameterShape& p = run.shapes.parameters[i];
    const bool split = p.split_dim >= 0 && !(p.split_heads > 0 && tp > p.split_heads);
    specs.push_back({p.name, Shape(p.shape), p.block,
                     split ? parallel::Placement::shard(p.split_dim, p.split_blocks) : parallel::Placement::replicate(),
                     run.holding_of(i) == Holding::kTrained, p.expert, p.expert >= 0 ? run.shapes.experts : 0});
  }
  return specs;
}

parallel::PlacementTable placements_of(const RunSpec& run, const Layout& l) {
  const parallel::PipelineLayout pipeline = parallel::PipelineLayout::make(
      run.model.n_layer, static_cast<int>(l.pp), static_cast<int>(l.virtual_stages));
  return parallel::PlacementTable::build(
      parameter_specs(run, l.tp), parallel::MeshShape{l.pp, l.dp, l.ep, 1, l.tp},
      [&](int64_t block) { return pipeline.stage_of_block(block); }, l.zero_stage, run.compute, run.compute);
}

StageParameters stage_parameters(const RunSpec& run, const parallel::PlacementTable& table, int stage) {
  std::map<std::string, Holding> holding;
  for (size_t i = 0; i < run.shapes.parameters.size(); ++i) holding[run.shapes.parameters[i].name] = run.holding_of(i);
  StageParameters s;
  const int tp = static_cast<int>(table.mesh().tp);
  for (const parallel::ParamPlacement* p : table.on_stage(stage)) {
    if (p->on_ep_rank() && p->expert_rank() != 0) continue;  // another ep rank's expert
    const int64_t n = p->local_shape(tp, 0).product();
    const Holding h = holding.at(p->name);
    if (h == Holding::kTrained) {
      s.numels.push_back(n);
      s.blocks.push_back(p->block);
      s.expert.push_back(p->on_ep_rank());
    } else {
      s.frozen_bytes += h == Holding::kNf4 ? quantization::Nf4Weight::bytes_for(n, run.nf4_double_quant)
                                           : n * static_cast<int64_t>(element_size(p->storage));
    }
  }
  return s;
}

struct StageCache {
  std::mutex mu;
  // (fingerprint of the shapes, tp, pp, virtual stages, ep) -> every stage's parameters.
  std::map<std::tuple<uint64_t, int64_t, int64_t, int64_t, int64_t>, std::vector<StageParameters>> stages;
};

std::shared_ptr<StageCache> new_stage_cache() { return std::make_shared<StageCache>(); }

namespace {

// The run's parameters, hashed (FNV-1a over every dimension, block, split and holding, and the
// dtype): a RunSpec whose shapes were replaced after its first evaluation misses the cache rather
// than reading stale entries.
uint64_t fingerprint(const RunSpec& run) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](int64_t v) {
    h ^= static_cast<uint64_t>(v);
    h *= 1099511628211ull;
  };
  for (size_t i = 0; i < run.shapes.parameters.size(); ++i) {
    const models::ParameterShape& p = run.shapes.parameters[i];
    for (int64_t d : p.shape) mix(d);
    mix(p.block);
    mix(p.split_dim);
    mix(p.split_heads);
    mix(p.split_blocks);
    mix(p.expert);
    mix(static_cast<int64_t>(run.holding_of(i)));
    mix(-7);  // a separator
  }
  mix(static_cast<int64_t>(run.compute));
  mix(run.nf4_double_quant ? 1 : 0);
  return h;
}

}  // namespace

const std::vector<StageParameters>& stages_of(const RunSpec& run, const Layout& l) {
  StageCache& cache = *run.stage_cache;
  const auto key = std::make_tuple(fingerprint(run), l.tp, l.pp, l.virtual_stages, l.ep);
  std::lock_guard<std::mutex> lock(cache.mu);
  auto it = cache.stages.find(key);
  if (it == cache.stages.end()) {
    const parallel::PlacementTable table = placements_of(run, l);
    std::vector<StageParameters> stages;
    for (int s = 0; s < l.pp; ++s) stages.push_back(stage_parameters(run, table, s));
    it = cache.stages.emplace(key, std::move(stages)).first;
  }
  return it->second;  // entries are never erased: the reference stays valid
}

}  // namespace trident::planner
