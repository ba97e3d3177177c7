// AdamW with torch.optim.AdamW's semantics (bias correction, decoupled weight decay), where
// weight decay applies only to parameters with 2 or more dims (matrices and embeddings;
// not biases or norm gains), as in GPT-2/nanoGPT training. State (m, v) is f32, allocated
// on the first step and tagged as optimizer-state memory.
#pragma once

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
  std::vector<Slot> slots_;
  AdamWOptions options_;
  int64_t step_ = 0;
};

}  // namespace trident::optim
