#include "parallel/tensor_parallel.h"

#include <typeindex>
#include <typeinfo>

#include "autograd/functions.h"
#include "core/allocator.h"
#include "parallel/placement.h"
#include "parallel/tp_style_registry.h"
#include "parallel/tp_styles.h"

namespace trident::parallel {
namespace {

// For the error of a plan entry whose style a layer type does not have.
std::string known_styles(const TpStyleRegistry& styles, std::type_index type) {
  std::string known;
  for (const std::string& name : styles.styles_for(type)) known += (known.empty() ? "" : ", ") + name;
  return known.empty() ? "no tensor-parallel style is registered for that type" : "its styles: " + known;
}

}  // namespace

Tensor TensorParallelPlan::local_from_full(const std::string& name, const Tensor& full) const {
  const auto it = splits_.find(name);
  if (it == splits_.end()) return full;
  TRI_CHECK(full.shape() == full_shapes_.at(name), "tensor parallel: '", name, "' has shape ", full.shape(),
            "; the model's is ", full_shapes_.at(name));
  return shard_of_full(full, Placement::shard(it->second.dim, it->second.blocks), size_, rank_);
}

// Note [Adapter factors] in nn/linear.h: each factor of an adapter on the layer is split with
// it (recorded beside the layer's own splits, so that it is sharded below and the placement
// table says so) or replicated with its gradient summed.
void TensorParallelPlan::split_adapter_factors(nn::Module& layer, const std::string& path,
                                               const nn::ParallelPlanEntry& entry, const TpStyle& style,
                                               comm::Communicator& tp,
                                               const std::vector<std::pair<std::string, nn::Module*>>& modules) {
  auto* linear = dynamic_cast<nn::LinearLayer*>(&layer);
  if (linear == nullptr) return;
  for (const auto& wrapper : linear->wrappers()) {
    for (const nn::AdapterFactor& f : wrapper->factors()) {
      TRI_CHECK_NOT_IMPLEMENTED(static_cast<bool>(style.factor_split), "tensor parallelism: layer '", path, "' (",
                                entry.style, ") has an adapter (", wrapper->name(), "), and the style '", entry.style,
                                "' does not split adapters yet: leave that layer out of the adapter's targets, or "
                                "use parallel.tp = 1");
      const std::string factor_path = path + "." + f.child;
      nn::Module* factor = nullptr;
      for (const auto& [p, m] : modules)
        if (p == factor_path) factor = m;
      TRI_CHECK(factor != nullptr, "tensor parallelism: the adapter on '", path, "' names a factor '", f.child,
                "' that is not a module of the layer");
      if (const std::optional<TpParamSplit> split = style.factor_split(f.side)) {
        const std::string name = factor_path + "." + split->param;
        TRI_CHECK(full_shapes_.contains(name), "tensor parallelism: the adapter factor '", name, "' is not a parameter");
        splits_.emplace(name, TensorSplit{split->dim, split->fused ? entry.fused : 1});
      } else {
        replicate_factor(*factor, tp);
      }
    }
  }
}

std::unique_ptr<TensorParallelPlan> TensorParallelPlan::apply(models::CausalLM& model, comm::Communicator& tp,
                                                              bool sequence_parallel) {
  const models::ModelConfig& cfg = model.model_config();
  const int n = tp.size();
  model.check_tensor_parallel(n);
  auto plan = std::unique_ptr<TensorParallelPlan>(new TensorParallelPlan());
  plan->size_ = n;
  plan->rank_ = tp.rank();
  for (const auto& [name, p] : model.named_parameters()) plan->full_shapes_.emplace(name, p.shape());
  if (n == 1) return plan;
  const nn::ParallelPlan entries = model.parallel_plan(n);
  TRI_CHECK_NOT_IMPLEMENTED(!entries.empty(), "tensor parallelism: model.arch = \"", cfg.arch,
                            "\" states no tensor-parallel plan (CausalLM::parallel_plan)");

  const TpStyleRegistry& styles = tp_style_registry();
  const std::vector<std::pair<std::string, nn::Module*>> layers = model.named_modules();
  const auto input = std::make_shared<const TpEntry>(tp, sequence_parallel);  // Note [One entry per input]
  for (const nn::ParallelPlanEntry& entry : entries) {
    int matched = 0;
    for (const auto& [path, module] : layers) {
      if (!nn::plan_pattern_matches(entry.pattern, path)) continue;
      ++matched;
      const std::type_index type = typeid(*module);
      const TpStyle* style = styles.find(entry.style, type);
      TRI_CHECK(style != nullptr, "tensor parallelism: the plan's entry '", entry.pattern, "' (", entry.style,
                ") names layer '", path, "' of type ", layer_type_name(type), ", which has no style '", entry.style,
                "' (", known_styles(styles, type), "; parallel/tp_style_registry.h)");
      for (const TpParamSplit& s : style->splits) {
        const std::string name = path + "." + s.param;  // a layer without a bias has none
        if (plan->full_shapes_.contains(name))
          plan->splits_.emplace(name, TensorSplit{s.dim, s.fused ? entry.fused : 1});
      }
      style->install(*module, {entry, path, tp, sequence_parallel, input});
      plan->split_adapter_factors(*module, path, entry, *style, tp, layers);
    }
    TRI_CHECK(matched > 0, "tensor parallelism: the plan's entry '", entry.pattern, "' (", entry.style,
              ") matches no layer of the model");
  }

  // Every rank built the same full model (same seed or weights); keep this rank's shards.
  // The shards are parameters (the allocator's category; the planner's memory model counts them so).
  autograd::NoGradGuard no_grad;
  MemoryCategoryGuard params(MemoryCategory::kParameter);
  for (auto& [name, p] : model.named_parameters())
    if (plan->is_split(name)) p.set_data(plan->local_from_full(name, p));
  return plan;
}

}  // namespace trident::parallel
