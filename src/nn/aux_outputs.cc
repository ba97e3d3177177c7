// AuxOutputs: auxiliary losses attached to activations, and values recorded per name.
#include "nn/aux_outputs.h"

#include <cmath>
#include <limits>
#include <utility>

#include "autograd/functions/aux_loss.h"
#include "autograd/recompute.h"
#include "core/check.h"
#include "core/copy.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"

namespace trident::nn {

// Note [Auxiliary losses and the loss seed]
// What gradient does an auxiliary loss need? The step's objective is the mean over its
// micro-batches of (LM loss + sum of coefficient x aux loss); each micro-batch's backward
// starts from loss_seed = 1 / micro-batches (times fp16's loss scale) at the LM loss, so an
// aux loss's backward must start from coefficient x loss_seed: the trainer sets the seed
// before the micro-batches, add_loss reads it when it attaches the loss (the seed holds for
// the whole step, reruns included), and the op hands it to the loss in the backward. Then
// every layout is right without knowing of the aux losses:
//   - data parallelism and ZeRO average gradients over the replicas as they do the LM loss's,
//     so the objective is the mean over replicas (a loss must be a mean over its rows, as the
//     LM loss is, for that to be the one-process objective);
//   - a pipeline runs a stage's backward where its blocks are: the loss attached there gets
//     its gradient there, from the seed every rank was given (no stage needs the last one's
//     loss);
//   - tensor parallelism: a loss computed from an activation every rank of the group holds
//     whole is the same on each rank, and each adds the same gradient to that activation, as
//     the conjugate collectives expect; a loss over a sequence-split activation (sequence
//     parallelism) is a part, and its module must combine the parts over the group itself
//     (Megatron's sequence_partition_group);
//   - fp16: the loss scale is in the seed, so unscaling divides it out of the aux gradient too.
//
// Note [Auxiliary values in a checkpointed region]
// A checkpointed region (autograd/functions/activation_checkpoint.h) runs twice: in the
// forward without recording, and in the backward with recording. Its first run records the
// values (grad mode is off, so add_loss attaches no node); the rerun attaches the node (the
// reentrant backward of the rerun's graph is the only one through the region, so the loss's
// gradient arrives once) but records no value (rerunning_recompute_region()). Each value and
// each gradient is so counted once, as in the region without checkpointing. A cost is the
// exception (add_layer_cost: an expert-parallel exchange's bytes and seconds): the rerun
// exchanges the rows again, so what it spends is recorded again.

double AuxValue::mean() const {
  return count == 0 ? std::numeric_limits<double>::quiet_NaN() : sum / static_cast<double>(count);
}

bool AuxOutputs::recording() { return !autograd::rerunning_recompute_region(); }

Tensor AuxOutputs::add_loss(const std::string& name, const Tensor& x, const Tensor& loss, double coefficient,
                            int64_t layer) {
  TRI_CHECK(loss.numel() == 1, "AuxOutputs::add_loss('", name, "'): the loss must have one element, got shape ",
            loss.shape());
  TRI_CHECK(std::isfinite(coefficient), "AuxOutputs::add_loss('", name, "'): the coefficient must be finite, got ",
            coefficient);
  if (recording()) record(name, loss, layer);
  return attach_aux_loss(x, loss, coefficient * loss_seed());
}

void AuxOutputs::add_metric(const std::string& name, double value) {
  if (!recording()) return;
  std::lock_guard<std::mutex> lock(mu_);
  AuxValue& v = values_[name];
  v.sum += value;
  ++v.count;
}

void AuxOutputs::add_layer_sums(int64_t layer, const std::string& name, std::span<const double> values) {
  if (recording()) add_layer_cost(layer, name, values);
}

void AuxOutputs::add_layer_cost(int64_t layer, const std::string& name, std::span<const double> values) {
  std::lock_guard<std::mutex> lock(mu_);
  nn::add_layer_sums(layer_sums_, {layer, name}, values);
}

void AuxOutputs::record(const std::string& name, const Tensor& loss, int64_t layer) {
  if (loss.device().is_cpu()) {
    const double value = loss.item();
    add_metric(name, value);
    const double sum_count[] = {value, 1.0};
    if (layer >= 0) add_layer_cost(layer, name, sum_count);
    return;
  }
  // On a device, no synchronisation per value: a running fp32 sum there, read by take().
  const Tensor part = ops::sum(core::cast(detach(loss), DType::kF32), {});
  std::lock_guard<std::mutex> lock(mu_);
  auto add = [&](auto& sums, const auto& key) {
    auto [it, added] = sums.try_emplace(key, part, 0);
    if (!added) it->second.first = ops::add(it->second.first, part);
    ++it->second.second;
  };
  add(device_sums_, name);
  if (layer >= 0) add(device_layer_sums_, AuxLayerKey{layer, name});
}

void AuxOutputs::set_loss_seed(double seed) {
  std::lock_guard<std::mutex> lock(mu_);
  seed_ = seed;
}

double AuxOutputs::loss_seed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return seed_;
}

AuxValues AuxOutputs::take() {
  std::lock_guard<std::mutex> lock(mu_);
  AuxValues out = std::exchange(values_, {});
  for (auto& [name, sum] : std::exchange(device_sums_, {})) {
    AuxValue& v = out[name];
    v.sum += sum.first.item();
    v.count += sum.second;
  }
  return out;
}

AuxLayerSums AuxOutputs::take_layer_sums() {
  std::lock_guard<std::mutex> lock(mu_);
  AuxLayerSums out = std::exchange(layer_sums_, {});
  for (auto& [key, sum] : std::exchange(device_layer_sums_, {})) {
    const double sum_count[] = {sum.first.item(), static_cast<double>(sum.second)};
    nn::add_layer_sums(out, key, sum_count);
  }
  return out;
}

}  // namespace trident::nn
