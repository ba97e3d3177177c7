#include "planner/fine_tuning.h"

#include <map>
#include <optional>
#include <set>

#include "adapters/lora.h"
#include "adapters/peft_files.h"
#include "core/check.h"
#include "models/causal_lm.h"
#include "models/registry.h"
#include "nn/freeze.h"

namespace trident::planner {
namespace {

using models::CausalLM;
using models::ParameterShape;

// The modules the parameter names make, in named_modules() order (a parent before its children,
// siblings in the order of their first parameter), each with its features when it is linear.
std::vector<adapters::LoraCandidate> modules_of(const models::ModelShapes& shapes, bool in_out) {
  std::map<std::string, const ParameterShape*> by_name;
  for (const ParameterShape& p : shapes.parameters) by_name.emplace(p.name, &p);
  std::vector<adapters::LoraCandidate> out;
  std::set<std::string> seen;
  for (const ParameterShape& p : shapes.parameters) {
    for (size_t dot = p.name.find('.'); dot != std::string::npos; dot = p.name.find('.', dot + 1)) {
      const std::string path = p.name.substr(0, dot);
      if (!seen.insert(path).second) continue;
      adapters::LoraCandidate m{path, std::nullopt};
      const auto w = by_name.find(path + ".weight");
      if (w != by_name.end() && w->second->shape.size() == 2 && w->second->block != CausalLM::kEmbedding) {
        const std::vector<int64_t>& s = w->second->shape;
        m.linear = adapters::LoraLayerInfo{path, in_out ? s[0] : s[1], in_out ? s[1] : s[0], in_out};
      }
      out.push_back(std::move(m));
    }
  }
  return out;
}

// The features a split along `dim` of a linear layer's weight divides: its outputs or inputs.
bool splits_outputs(const adapters::LoraLayerInfo& layer, int dim) { return dim == (layer.in_out ? 1 : 0); }

// Adds A (r, in) and B (out, r) of every layer in `adapted` after the layer's own parameters;
// returns the inserted parameters' names.
std::set<std::string> add_adapters(models::ModelShapes& shapes, const std::vector<adapters::LoraLayerInfo>& adapted,
                                   int64_t r) {
  std::set<std::string> added;
  // Note [Adapters' activations]
  // An adapted layer's forward is the base's product, A's (r per token) and B's (its outputs),
  // then B's scaled and added to the base's. B keeps A's output for its dW (r per token). Under
  // "selective" both factors' products keep their outputs too (they are products), beside the
  // base's: the layer's outputs once more. Counted per block as the first adapted block has
  // them; uncounted, LoRA's activations under "selective" were 19-33% under the allocator's
  // (GPT-2 "small", r = 8 on c_attn, c_proj and c_fc, Zen 4).
  int64_t first_block = -1;
  for (const adapters::LoraLayerInfo& layer : adapted)
    for (const ParameterShape& p : shapes.parameters)
      if (p.name == layer.path + ".weight" && p.block >= 0 && (first_block < 0 || p.block < first_block)) first_block = p.block;
  for (const adapters::LoraLayerInfo& layer : adapted) {
    const std::string prefix = layer.path + ".";
    size_t last = shapes.parameters.size(), weight = shapes.parameters.size();
    for (size_t i = 0; i < shapes.parameters.size(); ++i) {
      if (!shapes.parameters[i].name.starts_with(prefix)) continue;
      last = i;
      if (shapes.parameters[i].name == prefix + "weight") weight = i;
    }
    TRI_ASSERT(weight < shapes.parameters.size(), "the adapted layer '", layer.path, "' has no weight");
    const ParameterShape w = shapes.parameters[weight];
    ParameterShape a{prefix + "lora_A.weight", {r, layer.in}, w.block};
    ParameterShape b{prefix + "lora_B.weight", {layer.out, r}, w.block};
    if (w.split_dim >= 0 && splits_outputs(layer, w.split_dim)) {
      b.split_dim = 0;
      b.split_heads = w.split_heads;
      b.split_blocks = w.split_blocks;
    } else if (w.split_dim >= 0) {
      a.split_dim = 1;
    }
    added.insert(a.name);
    added.insert(b.name);
    if (w.block == first_block && first_block >= 0) {
      // A's output: r per token, replicated (A's columns split under a row-wise split sum into
      // it); B's: the layer's outputs, split with them under a column-wise split.
      models::SavedActivation h{layer.path + " lora_A output", r};
      h.kept_selective = true;
      models::SavedActivation y{layer.path + " lora_B output", layer.out};
      y.kept_none = false;
      y.kept_selective = true;
      y.tp_split = b.split_dim == 0;
      y.split_heads = b.split_dim == 0 ? w.split_heads : 0;
      shapes.block.push_back(h);
      shapes.block.push_back(y);
    }
    const auto at = shapes.parameters.begin() + static_cast<std::ptrdiff_t>(last + 1);
    shapes.parameters.insert(shapes.parameters.insert(at, b), a);  // A, then B
  }
  return added;
}

}  // namespace

void apply_fine_tuning(RunSpec& run, const train::TrainConfig& cfg) {
  const models::ModelFamily& family = models::model_family(cfg.model.arch);
  // LoRA's options and targets, from [lora] or the adapter the run starts from (Trainer::apply_adapters).
  std::optional<adapters::LoraOptions> lora;
  std::optional<adapters::LoraTargets> targets;
  if (!cfg.train.init_adapter.empty()) {
    auto read = adapters::read_peft_adapter(cfg.train.init_adapter);
    TRI_CHECK(read.is_ok(), "train.init_adapter: ", read.status().message());
    auto options = adapters::lora_options_for(read.value(), cfg.lora);
    TRI_CHECK(options.is_ok(), "train.init_adapter: ", options.status().message());
    lora = options.value();
    targets = read.value().targets;
  } else if (cfg.lora.enabled()) {
    lora = cfg.lora;
    targets = adapters::LoraTargets::from(cfg.lora);
  }
  std::vector<std::string> names;
  for (const ParameterShape& p : run.shapes.parameters) names.push_back(p.name);
  std::vector<bool> frozen = nn::frozen_by(names, cfg.train.freeze, "train.freeze");
  std::set<std::string> adapters_added;
  if (lora) {
    const std::vector<adapters::LoraLayerInfo> adapted =
        adapters::select_lora_layers(modules_of(run.shapes, family.linear_weights_in_out), *targets, cfg.model);
    adapters_added = add_adapters(run.shapes, adapted, lora->r);
    frozen.clear();
    for (const ParameterShape& p : run.shapes.parameters) frozen.push_back(!adapters_added.contains(p.name));
  }
  bool any_frozen = false, any_trained = false;
  for (bool f : frozen) (f ? any_frozen : any_trained) = true;
  if (!any_frozen && !cfg.quantization.enabled()) return;
  TRI_CHECK(any_trained, "every parameter is frozen (train.freeze = \"", cfg.train.freeze, "\"): nothing would train");
  run.holding.clear();
  for (bool f : frozen) run.holding.push_back(f ? Holding::kFrozen : Holding::kTrained);
  if (!cfg.quantization.enabled()) return;
  // QLoRA: quantize_base's choice, on the modules with the adapters among them.
  run.nf4_double_quant = cfg.quantization.double_quant;
  std::vector<std::string> paths, linear_paths;
  for (const adapters::LoraCandidate& m : modules_of(run.shapes, family.linear_weights_in_out)) {
    paths.push_back(m.path);
    if (m.linear) linear_paths.push_back(m.path);
  }
  const std::vector<bool> skipped = cfg.quantization.skips(linear_paths, paths);
  int64_t quantized = 0;
  for (size_t k = 0; k < linear_paths.size(); ++k) {
    if (skipped[k]) continue;
    for (size_t i = 0; i < run.shapes.parameters.size(); ++i)
      if (run.shapes.parameters[i].name == linear_paths[k] + ".weight" && run.holding[i] == Holding::kFrozen) {
        run.holding[i] = Holding::kNf4;
        ++quantized;
      }
  }
  TRI_CHECK(quantized > 0 || linear_paths.empty(), "quantization.base = \"nf4\" stores frozen linear "
            "layers in 4 bits, but no linear layer of the model is frozen (outside quantization.skip_modules = \"",
            cfg.quantization.skip_modules, "\"): train adapters on the base ([lora] r > 0) or freeze it (train.freeze)");
}

bool fine_tuning_accepts(const RunSpec& run, const Layout& l, std::string* why) {
  auto refuse = [&](const std::string& reason) {
    if (why != nullptr) *why = reason;
    return false;
  };
  const std::vector<ParameterShape>& params = run.shapes.parameters;
  for (size_t i = 0; i < params.size(); ++i) {
    // The placement table's own refusal (parallel/placement.cc), before it would throw.
    if (run.holding_of(i) != Holding::kTrained && params[i].expert >= 0 && l.ep > 1)
      return refuse("a frozen expert ('" + params[i].name + "') with parallel.ep = " + std::to_string(l.ep) +
                    " is not supported yet (issue #51); train it with parallel.ep = 1");
    if (run.holding_of(i) == Holding::kNf4 && l.zero_stage == 3)
      return refuse("quantization.base = \"nf4\" with parallel.zero_stage = 3: ZeRO-3 shards the frozen base, which "
                    "NF4 stores whole on each rank; use zero_stage <= 2");
    if (l.tp == 1 || !adapters::is_lora_parameter(params[i].name)) continue;
    const std::string layer = adapters::lora_layer_path(params[i].name) + ".weight";
    for (const ParameterShape& w : params) {
      if (w.name != layer) continue;
      const bool head = w.block == CausalLM::kHead && w.split_dim >= 0;  // vocabulary-parallel
      const bool replicated = w.split_heads > 0 && l.tp > w.split_heads;  // columnwise_replicated
      if (head || replicated)
        return refuse("tensor parallelism (parallel.tp = " + std::to_string(l.tp) + ") does not split adapters on '" +
                      adapters::lora_layer_path(params[i].name) + "' yet: leave it out of lora.target_modules");
    }
  }
  return true;
}

int64_t trained_parameters(const RunSpec& run) {
  int64_t n = 0;
  for (size_t i = 0; i < run.shapes.parameters.size(); ++i)
    if (run.holding_of(i) == Holding::kTrained) n += run.shapes.parameters[i].numel();
  return n;
}

bool product_weight_trains(const RunSpec& run, int64_t in, int64_t out) {
  if (run.holding.empty()) return true;
  const bool in_out = models::model_family(run.model.arch).linear_weights_in_out;
  const std::vector<int64_t> dims = in_out ? std::vector<int64_t>{in, out} : std::vector<int64_t>{out, in};
  bool seen = false;
  for (size_t i = 0; i < run.shapes.parameters.size(); ++i) {
    const ParameterShape& p = run.shapes.parameters[i];
    if (p.block < 0 || p.expert >= 0 || p.shape != dims || p.name.find(".lora_") != std::string::npos) continue;
    if (run.holding_of(i) == Holding::kTrained) return true;
    seen = true;
  }
  return !seen;
}

bool head_weight_trains(const RunSpec& run) {
  const models::ModelShapes& s = run.shapes;
  for (size_t i = 0; i < s.parameters.size(); ++i) {
    const ParameterShape& p = s.parameters[i];
    if (s.tied_head_weight ? p.name == *s.tied_head_weight
                           : p.block == CausalLM::kHead && p.shape.size() == 2 && p.shape[0] == run.model.vocab_size)
      return run.holding_of(i) == Holding::kTrained;
  }
  return false;
}

bool token_embedding_trains(const RunSpec& run) {
  const models::ModelShapes& s = run.shapes;
  for (size_t i = 0; i < s.parameters.size(); ++i) {
    const ParameterShape& p = s.parameters[i];
    if (p.block == CausalLM::kEmbedding && p.shape.size() == 2 && p.shape[0] == run.model.vocab_size)
      return run.holding_of(i) == Holding::kTrained;
  }
  return false;
}

bool experts_train(const RunSpec& run) {
  for (size_t i = 0; i < run.shapes.parameters.size(); ++i)
    if (run.shapes.parameters[i].expert >= 0 && run.holding_of(i) == Holding::kTrained) return true;
  return false;
}

AdapterWork adapter_work(const RunSpec& run, int64_t element_bytes) {
  AdapterWork w;
  w.blocks = static_cast<double>(std::max<int64_t>(1, run.model.n_layer));
  const double E = static_cast<double>(element_bytes);
  for (const ParameterShape& p : run.shapes.parameters) {
    if (p.shape.size() != 2) continue;
    if (p.name.ends_with(".lora_A.weight")) {
      w.products.emplace_back(p.shape[1], p.shape[0]);  // (in, r)
      w.backward_bytes_per_token += 3.0 * static_cast<double>(p.shape[1]) * E / w.blocks;  // dx added to the base's
    } else if (p.name.ends_with(".lora_B.weight")) {
      w.products.emplace_back(p.shape[1], p.shape[0]);  // (r, out)
      // Forward: the update scaled (read, write) and added to the base's output (read two, write
      // one); backward: the output's gradient scaled (read, write).
      w.forward_bytes_per_token += 5.0 * static_cast<double>(p.shape[0]) * E / w.blocks;
      w.backward_bytes_per_token += 2.0 * static_cast<double>(p.shape[0]) * E / w.blocks;
    }
  }
  return w;
}

}  // namespace trident::planner
