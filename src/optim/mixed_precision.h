// Mixed-precision training (Micikevicius et al., "Mixed Precision Training", 2018; the bf16
// and fp16 modes of Megatron-LM and DeepSpeed): the model's parameters, activations and
// gradients are bf16 or fp16; the optimizer updates fp32 master weights.
//
// Per step: each backward pass's low-precision gradients are folded into fp32 gradients of
// the masters as they become final (grad-ready hooks), so accumulation over micro-batches
// is fp32; the optimizer steps the masters; the masters are rounded back into the model.
// fp16 adds dynamic loss scaling: the loss is multiplied by the scale before backward so
// small gradients survive fp16; a step whose gradients hold an inf or NaN is skipped and
// the scale backs off; after growth_interval good steps it grows.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/options.h"
#include "core/tensor.h"
#include "nn/module.h"
#include "optim/adamw.h"

namespace trident::optim {

struct PrecisionOptions {
  std::string dtype = "fp32";         // "fp32", "bf16" (fp32 masters) or "fp16" (fp32 masters + loss scaling)
  double initial_loss_scale = 65536;  // fp16: the first scale (2^16)
  int64_t growth_interval = 1000;     // fp16: good steps in a row before the scale grows
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t hysteresis = 2;             // fp16: overflowing steps tolerated before a backoff
  double min_loss_scale = 1.0;
  static const OptionTable<PrecisionOptions>& table();

  // The model's dtype: f32, bf16 or f16. The one place `dtype` is read: everything else asks
  // these.
  DType compute_dtype() const;
  bool mixed() const { return compute_dtype() != DType::kF32; }
  bool loss_scaling() const { return compute_dtype() == DType::kF16; }
};

// Megatron-LM's DynamicGradScaler: an overflow uses up one unit of hysteresis, and when none
// is left the scale is multiplied by backoff_factor (not below min_loss_scale); growth_interval
// overflow-free steps in a row multiply it by growth_factor and restore the hysteresis.
class DynamicLossScaler {
 public:
  explicit DynamicLossScaler(const PrecisionOptions& options);

  double scale() const { return scale_; }
  // Call once per step with whether its gradients overflowed; returns whether to step.
  bool update(bool found_inf);
  int64_t skipped_steps() const { return skipped_; }

  struct State {
    double scale;
    int64_t growth_tracker, hysteresis_left, skipped;
  };
  State state() const { return {scale_, growth_tracker_, hysteresis_left_, skipped_}; }
  void load_state(const State& s);

 private:
  PrecisionOptions options_;
  double scale_;
  int64_t growth_tracker_ = 0;
  int64_t hysteresis_left_;
  int64_t skipped_ = 0;
};

// The fp32 master copy of a model's parameters.
class MasterWeights {
 public:
  // `params` are the model's fp32 parameters. Their current values become the masters (fp32,
  // tagged optimizer-state memory, on `master_device`: the parameters' own device by default,
  // the host for ZeRO-Offload); the parameters themselves switch to `compute` (set_data) and
  // get a grad-ready hook that adds their gradient, in fp32, to the master's .grad (moving it
  // to the master's device) and drops the model's copy.
  //
  // ZeRO-Offload (masters on the host, the model on a device): the hook starts the gradient's
  // copy, in the compute dtype, into pinned host memory on the device's copy stream
  // (core::copy_async_), so the transfers overlap the rest of the backward; once more than
  // `offload_in_flight_bytes` of them are on their way it waits for them, freeing their device
  // copies (Note [Offloaded gradients in flight]); finish_backward() widens and adds them to
  // the masters' fp32 .grad.
  MasterWeights(const std::vector<nn::NamedTensor>& params, DType compute,
                std::optional<Device> master_device = std::nullopt,
                int64_t offload_in_flight_bytes = kDefaultOffloadInFlightBytes);
  // parallel.bucket_mb's default: a bucket's worth of gradients in flight.
  static constexpr int64_t kDefaultOffloadInFlightBytes = int64_t{25} << 20;
  // Waits for gradient copies still in flight (their buffers must outlive them).
  ~MasterWeights();
  MasterWeights(const MasterWeights&) = delete;
  MasterWeights& operator=(const MasterWeights&) = delete;

  // Completes the gradients of the backward that just ran: call it after each backward pass
  // (each micro-batch) and before reading the masters' .grad. Nothing to do unless offloaded.
  void finish_backward();

  // ZeRO-Offload: the masters on the host, the model on a device.
  bool offloaded() const;
  // The masters under the parameters' names: what the optimizer steps and checkpoints hold.
  const std::vector<nn::NamedTensor>& masters() const { return masters_; }
  std::vector<Tensor> master_tensors() const;
  // Whether any master gradient holds an inf or a NaN.
  bool grads_overflowed() const;
  // Adds `grad` (any float dtype, the parameter's shape) to master `name`'s fp32 gradient: a
  // gradient that reaches the parameter from outside its backward (the pipeline's head).
  void add_grad(const std::string& name, const Tensor& grad);
  // Multiplies every master gradient by `factor` (unscaling the loss scale).
  void scale_grads(double factor);
  void zero_grads();
  // Steps `optimizer` (built over masters()) with learning rate `lr` and rounds the masters
  // into the model's parameters: on the host each right after its update; on a device in the
  // update's own launches (Note [AdamW into the model]); under ZeRO-Offload each master goes to
  // the device while the host steps the next. The same bits as optimizer.step(lr) then
  // copy_to_model().
  void step(AdamW& optimizer, double lr);
  // Rounds the masters into the model's parameters.
  void copy_to_model();
  // The same for master k alone, started: under ZeRO-Offload it is rounded on the host into
  // pinned memory and copied to the device asynchronously, overlapping what the host does
  // next (AdamW on the next master); finish_copy_to_model() waits for every such copy.
  // Elsewhere it is a plain copy.
  void copy_to_model_async(size_t k);
  void finish_copy_to_model();

 private:
  void check_finished() const;

  // Gradient copies from the device in flight (ZeRO-Offload), shared with the hooks.
  struct InFlight {
    struct Copy {
      Tensor master;
      Tensor staging;                // pinned host memory in the compute dtype, the copy's destination
      std::optional<Tensor> source;  // the device's gradient, kept alive until the copy completes
    };
    std::vector<Copy> copies;
    std::optional<Device> device;
    int64_t bytes = 0;  // the sources still alive
    int64_t limit = 0;  // more than this in flight: release_sources() (Note [Offloaded gradients in flight])
    // Waits for the copies and frees their device sources.
    void release_sources();
    // Then adds each copy to its master's fp32 .grad, in the order they started.
    void fold();
  };

  std::vector<nn::NamedTensor> masters_;
  std::vector<Tensor> model_params_;
  std::shared_ptr<InFlight> in_flight_ = std::make_shared<InFlight>();
  // Masters on their way to the model (ZeRO-Offload): the pinned sources, alive until the
  // copies complete.
  std::vector<Tensor> outgoing_;
};

}  // namespace trident::optim
