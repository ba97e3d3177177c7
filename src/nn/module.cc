#include "nn/module.h"

#include "core/copy.h"
#include "core/options.h"
#include "core/profiler.h"

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

void Module::collect_modules(const std::string& prefix, std::vector<std::pair<std::string, Module*>>& out) {
  for (const auto& [name, child] : children_) {
    out.emplace_back(prefix + name, child.get());
    child->collect_modules(prefix + name + ".", out);
  }
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out;
  collect_modules("", out);
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

void Module::add_module(const std::string& name, std::shared_ptr<Module> child) {
  TRI_CHECK(child != nullptr, "Module::add_module('", name, "'): no module");
  TRI_CHECK(!name.empty() && name.find('.') == std::string::npos, "Module::add_module: '", name,
            "' is not a module name (non-empty, no '.')");
  for (const auto& [n, c] : children_) TRI_CHECK(n != name, "Module::add_module: there is a module '", name, "' already");
  for (const auto& [n, t] : params_) TRI_CHECK(n != name, "Module::add_module: there is a parameter '", name, "' already");
  child->train(training_);
  children_.emplace_back(name, std::move(child));
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::zero_grad() {
  profiler::ProfileScope scope("zero_grad", profiler::Phase::kOptimizer);
  for (Tensor t : parameters()) t.zero_grad();
}

void Module::to(Device device) {
  for (Tensor t : parameters()) {
    if (t.device() == device) continue;
    TRI_CHECK(t.is_contiguous() && t.offset() == 0 && t.nbytes() == t.storage()->nbytes(), "Module::to(", device,
              "): a parameter of shape ", t.shape(), " is a view into a larger storage");
    const Tensor moved = core::to_device(t, device);
    t.zero_grad();
    // Hand the new allocation to the parameter's own storage (StorageImpl::reset_data), so the
    // tensor every module and optimizer holds now lives on the device.
    t.storage()->reset_data(std::move(moved.storage()->mutable_data_ptr()));
    t.bump_version();  // a tensor autograd saved before the move must not read the new bytes unnoticed
    const DataPtr& data = t.storage()->data_ptr();
    data.owner()->retag(data, MemoryCategory::kParameter);
  }
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
