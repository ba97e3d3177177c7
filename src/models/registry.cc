#include "models/registry.h"

#include "core/check.h"
#include "models/gpt2/family.h"
#include "models/llama/family.h"

namespace trident::models {

const std::vector<ModelFamily>& model_families() {
  static const std::vector<ModelFamily> families = {gpt2::family(), llama::family()};
  return families;
}

const ModelFamily& model_family(const std::string& arch) {
  std::string names;
  for (const ModelFamily& f : model_families()) {
    if (f.arch == arch) return f;
    names += (names.empty() ? "" : ", ") + f.arch;
  }
  TRI_CHECK(false, "model.arch = \"", arch, "\" is not a model family; the families are: ", names);
}

std::unique_ptr<CausalLM> build_model(const ModelConfig& cfg) {
  cfg.validate();
  return model_family(cfg.arch).build(cfg);
}

}  // namespace trident::models
