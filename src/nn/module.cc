#include "nn/module.h"

#include "core/options.h"

namespace trident::nn {

void Module::collect(const std::string& prefix, std::vector<NamedTensor>& out) const {
  for (const auto& [name, t] : params_) out.emplace_back(prefix + name, t);
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", out);
}

std::vector<NamedTensor> Module::named_parameters() const {
  std::vector<NamedTensor> out;
  collect("", out);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const Tensor& t : parameters()) n += t.numel();
  return n;
}

Tensor Module::parameter(const std::string& path) const {
  std::vector<std::string> names;
  for (auto& [name, t] : named_parameters()) {
    if (name == path) return t;
    names.push_back(name);
  }
  std::string msg = "no parameter named '" + path + "'";
  if (auto m = closest_match(path, names)) msg += " (did you mean '" + *m + "'?)";
  TRI_CHECK(false, msg);
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::zero_grad() {
  for (Tensor t : parameters()) t.zero_grad();
}

Tensor Module::register_parameter(const std::string& name, Tensor t) {
  for (const auto& [n, existing] : params_)
    TRI_CHECK(n != name, "parameter '", name, "' registered twice");
  t.set_requires_grad(true);
  const DataPtr& data = t.storage()->data_ptr();
  data.owner()->retag(data, MemoryCategory::kParameter);
  params_.emplace_back(name, t);
  return t;
}

}  // namespace trident::nn
