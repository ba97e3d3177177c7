// AdamW with torch.optim.AdamW's semantics (bias correction, decoupled weight decay), where
// weight decay applies only to parameters with 2 or more dims (matrices and embeddings;
// not biases or norm gains), as in GPT-2/nanoGPT training. State (m, v) is f32, allocated
// on the first step and tagged as optimizer-state memory.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/options.h"
#include "core/tensor.h"
#include "nn/module.h"

namespace trident::optim {

struct AdamWOptions {
  double lr = 6e-4;            // peak learning rate (the schedule scales it)
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;   // applied to parameters with >= 2 dims only
  double grad_clip = 1.0;      // global gradient-norm clipping; 0 turns it off
  static const OptionTable<AdamWOptions>& table();
};

class AdamW {
 public:
  AdamW(std::vector<nn::NamedTensor> params, const AdamWOptions& options);

  // Updates every parameter that has a gradient with learning rate `lr`.
  void step(double lr);
  // The same update one parameter at a time, in registration order, calling updated(k) after
  // parameter k (with or without a gradient): ZeRO-Offload ships each updated master to the
  // device while the next is stepped. The results are those of step(lr) (host: bit for bit).
  void step(double lr, const std::function<void(size_t)>& updated);
  // step(lr), then every parameter copied into models[k] (one per parameter, in registration
  // order, its shape, any dtype: a cast), bit for bit as step(lr) then core::copy_ each:
  // mixed precision's fp32 masters rounded into the bf16/f16 model. A parameter with a gradient
  // is written by its update (on a device, in the update's launches:
  // ops::adamw_update_multi_'s outs); one without is copied.
  void step_into(double lr, const std::vector<Tensor>& models);
  int64_t step_count() const { return step_; }

  // State for checkpoints: "<param>.exp_avg" / "<param>.exp_avg_sq" tensors plus the step.
  std::vector<nn::NamedTensor> state() const;
  void load_state(const std::vector<nn::NamedTensor>& state, int64_t step);

  const AdamWOptions& options() const { return options_; }

 private:
  struct Slot {
    std::string name;
    Tensor param;
    bool decay;
    std::optional<Tensor> m, v;
  };
  // One multi-tensor update of those of `slots` with weight decay `decay` that have gradients;
  // with `models` (nullptr: none), each updated parameter also goes into its slot's model tensor.
  void update(double lr, const std::vector<Slot*>& slots, bool decay, const std::vector<Tensor>* models = nullptr);
  // Both updates of every slot; with `models` every parameter also copied into models[k].
  void step_all(double lr, const std::vector<Tensor>* models);
  std::vector<Slot> slots_;
  AdamWOptions options_;
  int64_t step_ = 0;
};

}  // namespace trident::optim
