// Activation checkpointing: the node keeps the region's inputs and reruns it in backward.
#include "autograd/functions/activation_checkpoint.h"

#include <memory>

#include "autograd/engine.h"
#include "autograd/record.h"
#include "core/copy.h"

namespace trident {
using namespace autograd;

TRI_REGISTER_OP(kActivationCheckpoint, "activation_checkpoint");

namespace {

struct RngState {
  Generator* gen = nullptr;
  uint64_t seed = 0, offset = 0;
};

// Puts the generator back where the first run started, and where it was, on exit.
class RngRewind {
 public:
  explicit RngRewind(const RngState& saved) : gen_(saved.gen) {
    if (gen_ == nullptr) return;
    seed_ = gen_->seed();
    offset_ = gen_->offset();
    gen_->set_state(saved.seed, saved.offset);
  }
  ~RngRewind() {
    if (gen_ != nullptr) gen_->set_state(seed_, offset_);
  }
  RngRewind(const RngRewind&) = delete;
  RngRewind& operator=(const RngRewind&) = delete;

 private:
  Generator* gen_;
  uint64_t seed_ = 0, offset_ = 0;
};

}  // namespace

Tensor activation_checkpoint(std::function<Tensor(const TensorList&)> fn, const TensorList& inputs, RecomputePolicy policy,
                  Generator* rng) {
  TRI_PROFILE_OP(kActivationCheckpoint);
  // Captured parameters may need gradients even when no input does, so grad mode alone decides.
  // A region inside another one is part of it: the outer rerun reruns it too.
  if (!GradMode::is_enabled() || in_recompute_region()) return fn(inputs);
  auto region = std::make_shared<RecomputeRegion>();
  region->policy = policy;
  const RngState rng_state{rng, rng ? rng->seed() : 0, rng ? rng->offset() : 0};
  Tensor out = [&] {
    NoGradGuard no_grad;
    RecomputeScope scope(region.get());
    return fn(inputs);
  }();
  TRI_CHECK(is_floating(out.dtype()), "activation_checkpoint: the region must return a floating tensor, got ", out.dtype());
  // The node's output must be a tensor of its own, not one of the inputs passed through.
  for (const Tensor& in : inputs)
    if (out.is_same(in)) out = core::clone(out);

  std::vector<SavedTensor> saved;
  std::vector<bool> input_requires_grad;
  OptionalTensors recorded_inputs;
  for (const Tensor& in : inputs) {
    saved.emplace_back(in);
    input_requires_grad.push_back(in.requires_grad());
    recorded_inputs.emplace_back(in);
  }
  record(kActivationCheckpoint, recorded_inputs, {out},
         [fn = std::move(fn), saved = std::move(saved), input_requires_grad, region,
          rng_state](const BackwardContext& c) {
           TRI_CHECK(!region->replaying, "activation_checkpoint: a region can be back-propagated once; "
                                         "backward with retain_graph through a checkpoint is not supported");
           TensorList rerun_inputs;
           for (size_t i = 0; i < saved.size(); ++i) {
             Tensor d = detach(saved[i].get());
             if (input_requires_grad[i]) d.set_requires_grad(true);
             rerun_inputs.push_back(d);
           }
           region->replaying = true;
           const Tensor rerun_out = [&] {
             EnableGradGuard grad_on;
             RngRewind rewind(rng_state);
             RecomputeScope scope(region.get());
             return fn(rerun_inputs);
           }();
           TRI_CHECK(region->next_kept == region->kept.size(), "activation_checkpoint: the rerun made ", region->next_kept,
                     " matrix products, the first run ", region->kept.size(),
                     "; the region's function must do the same work every time it runs");
           region->kept.clear();
           GradList grads(saved.size());
           if (!rerun_out.requires_grad()) return grads;  // nothing inside needed a gradient
           backward(std::vector<Tensor>{rerun_out}, {std::optional<Tensor>(c.grad())});
           for (size_t i = 0; i < saved.size(); ++i)
             if (c.needs(static_cast<int>(i)) && rerun_inputs[i].grad().has_value()) grads[i] = *rerun_inputs[i].grad();
           return grads;
         });
  return out;
}

}  // namespace trident
