// Module: the base of every layer and model. A module owns named parameters and child
// modules, and lists them recursively under dotted paths ("h.0.attn.c_attn.weight"), which
// is what optimizers, checkpoints and (later) parallelism plans address parameters by.
//
// Models are written single-device and know nothing of parallelism (STYLE.md, "Parallelism
// is a plan applied to a single-device model"). Parameters are created tagged as
// MemoryCategory::kParameter so the allocator's statistics separate them from activations.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace trident::nn {

using NamedTensor = std::pair<std::string, Tensor>;

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Every parameter of this module and its children, depth-first in registration order.
  std::vector<NamedTensor> named_parameters() const;
  std::vector<Tensor> parameters() const;
  int64_t num_parameters() const;
  // The parameter at a dotted path; throws naming the path and the closest existing one.
  Tensor parameter(const std::string& path) const;
  // Every descendant module under its dotted path ("h.0.attn.c_attn"), depth-first in
  // registration order (parameters' paths are these plus ".name"). Parallel plans find the
  // layers they split this way (nn/parallel_plan.h).
  std::vector<std::pair<std::string, Module*>> named_modules();

  // Training mode (dropout active) versus evaluation mode; applies to children.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Adds `child` under `name` from outside the module: what code that wraps a layer without
  // the model knowing (an adapter's factors, nn/wrapper.h) uses to give its parameters a place
  // in the tree, so that optimizers, checkpoints and parallelism see them as the layer's own
  // ("h.0.attn.c_attn.lora_A.weight"). Throws when `name` is empty, has a '.', or is taken.
  void add_module(const std::string& name, std::shared_ptr<Module> child);

  // Clears .grad of every parameter.
  void zero_grad();

  // Moves every parameter to `device` in place: each keeps its tensor (and so every reference
  // to it, in optimizers and plans) and gets its storage's bytes on the device. Call before
  // building optimizers; gradients are cleared.
  void to(Device device);

 protected:
  // Registers `t` (made a leaf that requires grad) under `name`, and returns it.
  Tensor register_parameter(const std::string& name, Tensor t);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    children_.emplace_back(name, m);
    return m;
  }

 private:
  void collect(const std::string& prefix, std::vector<NamedTensor>& out) const;
  void collect_modules(const std::string& prefix, std::vector<std::pair<std::string, Module*>>& out);

  std::vector<NamedTensor> params_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

}  // namespace trident::nn
