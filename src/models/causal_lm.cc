#include "models/causal_lm.h"

#include "core/check.h"

namespace trident::models {

void check_documents(const ops::Documents* documents, const Tensor& idx, const char* family) {
  if (documents == nullptr) return;
  TRI_CHECK(documents->positions.shape() == idx.shape(), family, ": the documents' position ids ",
            documents->positions.shape(), " do not match the token ids ", idx.shape());
}

std::vector<std::vector<nn::NamedTensor>> CausalLM::parts() const {
  std::vector<std::vector<nn::NamedTensor>> parts(static_cast<size_t>(num_blocks()) + 1);
  for (auto& [name, p] : named_parameters()) {
    const int64_t block = block_of(name);
    parts[block >= 0 ? static_cast<size_t>(block) + 1 : 0].emplace_back(name, p);
  }
  return parts;
}

}  // namespace trident::models
