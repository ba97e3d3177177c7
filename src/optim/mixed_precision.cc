#include "optim/mixed_precision.h"

#include <algorithm>
#include <cmath>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "core/allocator.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/profiler.h"
#include "ops/elementwise.h"
#include "ops/optim.h"

namespace trident::optim {

const OptionTable<PrecisionOptions>& PrecisionOptions::table() {
  static const auto t =
      OptionTable<PrecisionOptions>("precision", "Mixed precision: compute dtype, fp32 master weights, loss scaling")
          .add("dtype", &PrecisionOptions::dtype,
               "parameters, activations and gradients; bf16 and fp16 keep fp32 master weights for the optimizer",
               {"fp32", "bf16", "fp16"})
          .add("initial_loss_scale", &PrecisionOptions::initial_loss_scale, "fp16: first loss scale",
               Range::positive())
          .add("growth_interval", &PrecisionOptions::growth_interval,
               "fp16: overflow-free steps in a row before the scale grows", Range::at_least(1))
          .add("growth_factor", &PrecisionOptions::growth_factor, "fp16: scale multiplier on growth",
               Range::at_least(1.0))
          .add("backoff_factor", &PrecisionOptions::backoff_factor, "fp16: scale multiplier on overflow",
               Range::between(1e-6, 1.0))
          .add("hysteresis", &PrecisionOptions::hysteresis, "fp16: overflowing steps tolerated before a backoff",
               Range::at_least(1))
          .add("min_loss_scale", &PrecisionOptions::min_loss_scale, "fp16: the scale never backs off below this",
               Range::positive());
  return t;
}

DType PrecisionOptions::compute_dtype() const {
  if (dtype == "bf16") return DType::kBF16;
  if (dtype == "fp16") return DType::kF16;
  TRI_CHECK(dtype == "fp32", "precision.dtype is \"", dtype, "\"; allowed: \"fp32\", \"bf16\", \"fp16\"");
  return DType::kF32;
}

DynamicLossScaler::DynamicLossScaler(const PrecisionOptions& options)
    : options_(options),
      scale_(options.loss_scaling() ? options.initial_loss_scale : 1.0),
      hysteresis_left_(options.hysteresis) {}

bool DynamicLossScaler::update(bool found_inf) {
  if (!options_.loss_scaling()) return !found_inf;
  if (found_inf) {
    ++skipped_;
    growth_tracker_ = 0;
    if (--hysteresis_left_ <= 0) scale_ = std::max(scale_ * options_.backoff_factor, options_.min_loss_scale);
    return false;
  }
  if (++growth_tracker_ == options_.growth_interval) {
    growth_tracker_ = 0;
    hysteresis_left_ = options_.hysteresis;
    scale_ *= options_.growth_factor;
  }
  return true;
}

void DynamicLossScaler::load_state(const State& s) {
  TRI_CHECK(std::isfinite(s.scale) && s.scale > 0, "loss scaler state: scale must be finite and positive, got ",
            s.scale);
  scale_ = s.scale;
  growth_tracker_ = s.growth_tracker;
  hysteresis_left_ = s.hysteresis_left;
  skipped_ = s.skipped;
}

// Note [Offloaded gradients in flight]
// Under ZeRO-Offload each gradient leaves the device as the backward makes it final, in the
// compute dtype (bf16: half the bytes of the fp32 masters' over the link), into pinned host
// memory; at finish_backward() the host widens each exactly as it adds it to the master's fp32
// gradient, the same bits as widening on the device. A copy's device source must live until
// the copy completes, and nothing else waits for the copies inside the backward, so unbounded,
// every gradient of the model waits on the device until the backward's end (and widened to f32
// there, 4 bytes per parameter, as much as no offload keeps). So once more than a bucket's worth
// (parallel.bucket_mb) is in flight, the host waits for the copies and frees their sources: the
// device holds at most that plus the gradient that crossed it. The wait drains the device's
// queue once per bucket of gradients; the host adds nothing there, so it queues the next
// kernels at once.
void MasterWeights::InFlight::release_sources() {
  if (bytes == 0) return;
  core::wait_async_copies(*device);
  for (Copy& c : copies) c.source.reset();
  bytes = 0;
}

void MasterWeights::InFlight::fold() {
  if (copies.empty()) return;
  MemoryCategoryGuard grads(MemoryCategory::kGradient);
  release_sources();
  for (const Copy& c : copies) {
    std::optional<Tensor>& acc = Tensor(c.master).mutable_grad();
    if (acc.has_value()) {
      ops::add_(*acc, c.staging);  // widened as it is added (Note [Mixed-dtype add_])
    } else {
      acc = c.staging.dtype() == DType::kF32 ? c.staging : core::cast(c.staging, DType::kF32);
    }
  }
  copies.clear();
}

MasterWeights::MasterWeights(const std::vector<nn::NamedTensor>& params, DType compute,
                             std::optional<Device> master_device, int64_t offload_in_flight_bytes) {
  in_flight_->limit = offload_in_flight_bytes;
  for (const auto& [name, p] : params) {
    TRI_CHECK(p.dtype() == DType::kF32, "mixed precision: parameter '", name, "' must start in f32, got ", p.dtype());
    Tensor master = [&, &p = p] {  // &p = p: clang before 16 cannot capture a structured binding (fuzz/)
      MemoryCategoryGuard state(MemoryCategory::kOptimizerState);
      const Device where = master_device.value_or(p.device());
      if (where == p.device()) return core::clone(p);
      // Masters on the host for a device model: pinned, so copy_to_model moves them at full speed.
      return where.is_cpu() ? core::pin_memory(p) : core::to_device(p, where);
    }();
    master.set_requires_grad(true);
    Tensor model_param = p;
    {
      MemoryCategoryGuard param_memory(MemoryCategory::kParameter);
      model_param.set_data(core::cast(p, compute));
    }
    // Fold each backward pass's gradient into the master's fp32 .grad as soon as it is final.
    std::weak_ptr<InFlight> in_flight = in_flight_;
    autograd::register_grad_ready_hook(model_param, [master, in_flight](const Tensor& leaf) mutable {
      const std::optional<Tensor>& g = leaf.grad();
      if (!g.has_value()) return;
      profiler::ProfileScope scope("master.fold_grad", profiler::Phase::kOptimizer);
      MemoryCategoryGuard grads(MemoryCategory::kGradient);
      const std::shared_ptr<InFlight> copies = in_flight.lock();
      if (copies && master.device().is_cpu() && !g->device().is_cpu()) {
        // ZeRO-Offload: the device-to-host copy overlaps the rest of the backward (Note
        // [Offloaded gradients in flight]).
        const Tensor source = core::contiguous(*g);
        Tensor staging = empty_pinned(source.shape(), source.dtype());
        core::copy_async_(staging, source);
        copies->copies.push_back({master, staging, source});
        copies->device = source.device();
        copies->bytes += static_cast<int64_t>(source.nbytes());
        Tensor(leaf).zero_grad();
        if (copies->bytes > copies->limit) copies->release_sources();
        return;
      }
      const Tensor here = g->device() == master.device() ? *g : core::to_device(*g, master.device());
      std::optional<Tensor>& acc = master.mutable_grad();
      if (acc.has_value()) {
        ops::add_(*acc, here);  // later micro-batches: no f32 copy of g (Note [Mixed-dtype add_])
      } else {
        acc = core::cast(here, DType::kF32);
      }
      Tensor(leaf).zero_grad();
    });
    masters_.emplace_back(name, master);
    model_params_.push_back(model_param);
  }
}

MasterWeights::~MasterWeights() {
  if (!outgoing_.empty()) {
    try {
      core::wait_async_copies(model_params_.front().device());
    } catch (...) {  // destructors must not throw; the device's error surfaces on its next use
    }
  }
  if (in_flight_->copies.empty()) return;
  try {
    core::wait_async_copies(*in_flight_->device);
  } catch (...) {  // destructors must not throw; the device's error surfaces on its next use
  }
}

void MasterWeights::check_finished() const {
  TRI_CHECK(in_flight_->copies.empty(), "mixed precision: ", in_flight_->copies.size(),
            " gradient copies from the device are still in flight; call finish_backward() after the backward");
}

void MasterWeights::finish_backward() {
  if (in_flight_->copies.empty()) return;
  profiler::ProfileScope scope("master.finish_backward", profiler::Phase::kOptimizer);
  in_flight_->fold();
}

std::vector<Tensor> MasterWeights::master_tensors() const {
  std::vector<Tensor> out;
  for (const auto& [name, m] : masters_) out.push_back(m);
  return out;
}

bool MasterWeights::grads_overflowed() const {
  profiler::ProfileScope scope("master.overflow_check", profiler::Phase::kOptimizer);
  check_finished();
  std::vector<Tensor> grads;
  for (const auto& [name, m] : masters_)
    if (m.grad().has_value()) grads.push_back(*m.grad());
  return !std::isfinite(ops::sum_of_squares(grads));
}

void MasterWeights::add_grad(const std::string& name, const Tensor& grad) {
  const auto it = std::find_if(masters_.begin(), masters_.end(), [&](const nn::NamedTensor& m) { return m.first == name; });
  TRI_CHECK(it != masters_.end(), "mixed precision: no master weight named '", name, "'");
  Tensor master = it->second;
  TRI_CHECK(grad.shape() == master.shape(), "mixed precision: gradient ", grad.shape(), " for master '", name,
            "' of shape ", master.shape());
  profiler::ProfileScope scope("master.add_grad", profiler::Phase::kOptimizer);
  MemoryCategoryGuard grads(MemoryCategory::kGradient);
  Tensor g32 = core::to_device(core::cast(grad, DType::kF32), master.device());
  std::optional<Tensor>& acc = master.mutable_grad();
  if (acc.has_value()) {
    ops::add_(*acc, g32);
  } else {
    acc = core::clone(g32);
  }
}

void MasterWeights::scale_grads(double factor) {
  profiler::ProfileScope scope("master.scale_grads", profiler::Phase::kOptimizer);
  check_finished();
  for (const auto& [name, m] : masters_)
    if (m.grad().has_value()) ops::scale_(*m.grad(), factor);
}

void MasterWeights::zero_grads() {
  profiler::ProfileScope scope("master.zero_grads", profiler::Phase::kOptimizer);
  for (auto& [name, m] : masters_) Tensor(m).zero_grad();
}

// Note [AdamW into the model]
// With the masters on the model's device (a GPU, no offload), rounding them into the model
// after the step is one cast kernel per parameter reading every master back (GPT-2 124M on an
// H200: 148 launches, 0.77 ms beside AdamW's 1.13 ms; together 1.19 ms this way). Instead
// AdamW writes each updated master, rounded to the compute dtype, into its model parameter in
// the same multi-tensor launches (AdamW::step_into; DeviceKernels::adamw_update_multi's
// `out`): the value it has in a register anyway, 2 bytes more per element written, nothing
// read again. The rounding is the cast's (to nearest even), so the model holds the bits of
// step then copy_to_model; a master without a gradient is not updated and is copied as before.
void MasterWeights::step(AdamW& optimizer, double lr) {
  const bool host = !masters_.empty() && masters_.front().second.device().is_cpu() &&
                    model_params_.front().device().is_cpu();
  if (host) {
    // Each master is rounded into the model right after its update, while it is still in cache
    // (LLaMA-125M's block weights are 2-6 MB), instead of reading all 400 MB back afterwards.
    // The same bits as step then copy_to_model (AdamW::step's per-parameter form is bitwise).
    return optimizer.step(lr, [&](size_t k) {
      profiler::ProfileScope scope("master.copy_to_model", profiler::Phase::kOptimizer);
      copy_to_model_async(k);
    });
  }
  if (!offloaded()) {
    // The masters rounded into the model by AdamW's own launches (Note [AdamW into the model]).
    check_finished();
    return optimizer.step_into(lr, model_params_);
  }
  optimizer.step(lr, [&](size_t k) {
    profiler::ProfileScope scope("master.copy_to_model", profiler::Phase::kOptimizer);
    copy_to_model_async(k);
  });
  profiler::ProfileScope scope("master.copy_to_model", profiler::Phase::kOptimizer);
  finish_copy_to_model();
}

void MasterWeights::copy_to_model() {
  profiler::ProfileScope scope("master.copy_to_model", profiler::Phase::kOptimizer);
  for (size_t k = 0; k < masters_.size(); ++k) copy_to_model_async(k);
  finish_copy_to_model();
}

bool MasterWeights::offloaded() const {
  return !masters_.empty() && masters_.front().second.device().is_cpu() && !model_params_.front().device().is_cpu();
}

void MasterWeights::copy_to_model_async(size_t k) {
  check_finished();
  TRI_CHECK(k < masters_.size(), "mixed precision: master ", k, " is out of range (", masters_.size(), " masters)");
  autograd::NoGradGuard no_grad;
  const Tensor& master = masters_[k].second;
  const Tensor& param = model_params_[k];
  if (!master.device().is_cpu() || param.device().is_cpu() || !param.is_contiguous()) {
    core::copy_(param, master);
    return;
  }
  // ZeRO-Offload: the masters are pinned; a compute-dtype model needs them rounded first.
  Tensor source = master;
  if (param.dtype() != master.dtype()) {
    source = empty_pinned(master.shape(), param.dtype());
    core::copy_(source, master);
  }
  core::copy_async_(param, source);
  outgoing_.push_back(source);
}

void MasterWeights::finish_copy_to_model() {
  if (outgoing_.empty()) return;
  core::wait_async_copies(model_params_.front().device());
  outgoing_.clear();
}

}  // namespace trident::optim
