// The registry of tensor-parallel styles, keyed by (style name, layer type): for each pair,
// which of the layer's parameters the style splits and how (the plan's TensorSplit
// bookkeeping), and how it installs its wrapper on the layer (nn/wrapper.h, kind parallelism).
// TensorParallelPlan::apply (tensor_parallel.h) looks every layer a plan entry names up here,
// so a new layer type gets tensor parallelism by registering styles where they are
// implemented, without an edit in the applier.
//
// It does not hold the styles' computations (tp_styles.cc, or wherever a style is written) nor
// decide which layers get a style (the model's plan does: nn/parallel_plan.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <typeindex>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/parallel_plan.h"

namespace trident::parallel {

class TpEntry;  // tp_styles.h

// One parameter a style splits: along `dim`, in the plan entry's `fused` blocks when `fused`
// (each block divided over the ranks alike), else as one block. A parameter the layer lacks (a
// Linear without a bias) is skipped.
struct TpParamSplit {
  std::string param;  // the name under the layer ("weight", "bias")
  int64_t dim = 0;
  bool fused = false;
};

// What a style's install sees of one layer it is applied to.
struct TpStyleTarget {
  const nn::ParallelPlanEntry& entry;
  const std::string& path;  // the layer's module path
  comm::Communicator& tp;
  bool sequence_parallel;
  // The model's one entry into the tensor-parallel region, for the layers that read a
  // replicated input (Note [One entry per input] in tp_styles.h).
  const std::shared_ptr<const TpEntry>& input;
};

struct TpStyle {
  std::string name;
  std::type_index layer;  // the layer's exact (dynamic) type
  std::vector<TpParamSplit> splits;
  // Checks the entry against the layer (throwing, naming both) and adds the style's wrapper.
  // Called after the applier has recorded the splits, before it shards the parameters: the
  // layer's parameters still have their full shapes.
  std::function<void(nn::Module& layer, const TpStyleTarget& target)> install;
  // An adapter's factor on `side` of the layer (nn/linear.h, Note [Adapter factors]): how its
  // weight is split (its "weight"), or nullopt: replicated, its gradient summed over the ranks.
  // Unset: the style does not take adapters, and a layer with one is an error.
  std::function<std::optional<TpParamSplit>(nn::FactorSide side)> factor_split;
};

// Not synchronized: register styles before any plan is applied (static initialization, or the
// start of main), and look them up afterwards.
class TpStyleRegistry {
 public:
  // Throws when (style.name, style.layer) is registered already.
  void add(TpStyle style);
  // The style `name` for a layer of type `layer`, or null.
  const TpStyle* find(const std::string& name, std::type_index layer) const;
  // The names registered for a layer type, sorted.
  std::vector<std::string> styles_for(std::type_index layer) const;

 private:
  std::vector<TpStyle> styles_;
};

// The process's registry, with tp_styles.cc's styles in it (Note [Registering styles]).
TpStyleRegistry& tp_style_registry();

// A readable name for a layer type ("nn::Linear"), for messages.
std::string layer_type_name(std::type_index type);

// Registers `name` for layers of type Layer (a Module), its install called with the layer as a
// Layer.
template <class Layer>
void add_tp_style(TpStyleRegistry& registry, std::string name, std::vector<TpParamSplit> splits,
                  std::function<void(Layer&, const TpStyleTarget&)> install,
                  std::function<std::optional<TpParamSplit>(nn::FactorSide)> factor_split = {}) {
  registry.add({std::move(name), typeid(Layer), std::move(splits),
                [install = std::move(install)](nn::Module& layer, const TpStyleTarget& target) {
                  install(static_cast<Layer&>(layer), target);
                },
                std::move(factor_split)});
}

}  // namespace trident::parallel

// Registers a style at static initialization, from a file linked as an object (a program's own
// sources, a test), as TRI_REGISTER_OP does ops: TRI_REGISTER_TP_STYLE(MyLayer, "name", {splits},
// install). Not for files of a static library (Note [Registering styles]).
#define TRI_TP_STYLE_CAT2(a, b) a##b
#define TRI_TP_STYLE_CAT(a, b) TRI_TP_STYLE_CAT2(a, b)
#define TRI_REGISTER_TP_STYLE(Layer, ...)                                                  \
  static const bool TRI_TP_STYLE_CAT(tri_tp_style_registered_, __LINE__) =               \
      (::trident::parallel::add_tp_style<Layer>(::trident::parallel::tp_style_registry(), \
                                                __VA_ARGS__),                              \
       true)
