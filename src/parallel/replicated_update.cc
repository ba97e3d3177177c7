#include "parallel/replicated_update.h"

#include <limits>

#include "optim/clip_grad.h"
#include "parallel/grad_norm.h"

namespace trident::parallel {

ReplicatedUpdate::ReplicatedUpdate(std::vector<ParamGroup> groups, std::unique_ptr<optim::MasterWeights> master,
                                   int64_t bucket_bytes, const optim::AdamWOptions& options,
                                   const PlacementTable* placements, comm::Communicator* tp, comm::Communicator* pp,
                                   const ParallelOptions& compression)
    : master_(std::move(master)), placements_(placements), tp_(tp), pp_(pp) {
  for (const ParamGroup& g : groups) params_.insert(params_.end(), g.params.begin(), g.params.end());
  const std::string& kind = compression.grad_compression;
  int communicating = 0;
  for (const ParamGroup& g : groups) communicating += g.comm != nullptr ? 1 : 0;
  TRI_CHECK(kind == "none" || communicating <= 1, "parallel.grad_compression = ", kind, " compresses one data-parallel ",
            "group's gradients; this run reduces ", communicating, " groups");
  // With masters the buckets average the masters' fp32 gradients, which MasterWeights fills
  // after each backward (not autograd): no overlap hooks; the model's compute-dtype copies
  // then follow rank 0's masters.
  const std::vector<nn::NamedTensor> w = weights();
  size_t at = 0;
  for (const ParamGroup& g : groups) {
    const std::vector<nn::NamedTensor> mine(w.begin() + static_cast<std::ptrdiff_t>(at),
                                            w.begin() + static_cast<std::ptrdiff_t>(at + g.params.size()));
    at += g.params.size();
    if (g.comm != nullptr)
      dp_.push_back(std::make_unique<DataParallel>(mine, *g.comm, bucket_bytes, master_ == nullptr,
                                                   reducer_for(compression, *g.comm)));
  }
  if (!dp_.empty() && master_) master_->copy_to_model();
  optimizer_ = std::make_unique<optim::AdamW>(w, options);
  if (!dp_.empty() && kind == "onebit_adam")
    onebit_ = std::make_unique<OnebitAdam>(w, *optimizer_, *groups.front().comm, compression.onebit_warmup_steps,
                                           compression.onebit_block, compression.onebit_bound_update);
}

void ReplicatedUpdate::begin_backward(bool last) {
  for (auto& dp : dp_) {
    dp->reducer().set_step(step_count());
    dp->set_sync(last && !local_gradients());  // only the step's last micro-batch communicates
  }
}

void ReplicatedUpdate::end_backward() {
  if (master_) master_->finish_backward();
}

void ReplicatedUpdate::finish_backward() {
  if (local_gradients()) return;
  for (auto& dp : dp_) dp->finish();
}

void ReplicatedUpdate::add_grad(const std::string& name, const Tensor& grad) {
  TRI_CHECK(master_ != nullptr, "ReplicatedUpdate::add_grad('", name, "'): only fp32 masters take outside gradients");
  master_->add_grad(name, grad);
}

StepOutcome ReplicatedUpdate::step(const StepContext& ctx) {
  StepOutcome out;
  bool apply = true;
  if (ctx.loss_scaling) {
    // Under tensor parallelism each rank holds other slices: the step is skipped if any rank's
    // gradients overflowed, so every rank decides the same.
    const double scale = ctx.scaler->scale();
    apply = ctx.scaler->update(!ctx.all_ranks(!master_->grads_overflowed()));
    out.skipped = !apply;
    if (apply) master_->scale_grads(1.0 / scale);
  }
  if (!apply) {
    out.grad_norm = std::numeric_limits<double>::quiet_NaN();  // not measured: the gradients overflowed
    return out;
  }
  const std::vector<nn::NamedTensor> w = weights();
  if (tp_ != nullptr || pp_ != nullptr || ep_ != nullptr) {
    out.grad_norm = clip_grad_norm_sharded(w, placements_, tp_, pp_, ctx.max_norm, ep_);
  } else {
    std::vector<Tensor> tensors;
    for (const auto& [name, t] : w) tensors.push_back(t);
    out.grad_norm = optim::clip_grad_norm_(tensors, ctx.max_norm);
  }
  if (local_gradients()) {
    TRI_CHECK(master_ == nullptr, "parallel.grad_compression = onebit_adam steps fp32 parameters (precision.dtype = fp32)");
    onebit_->step(ctx.lr);
    return out;
  }
  if (master_) master_->step(*optimizer_, ctx.lr);
  else optimizer_->step(ctx.lr);
  if (onebit_) onebit_->count_warmup_step();
  return out;
}

void ReplicatedUpdate::zero_grads() {
  if (master_) master_->zero_grads();
}

std::vector<nn::NamedTensor> ReplicatedUpdate::weights() const { return master_ ? master_->masters() : params_; }

void ReplicatedUpdate::load_weights(const CheckpointSource& source) {
  for (const auto& [name, p] : weights()) source.assign(name, p);
  if (master_) master_->copy_to_model();
}

void ReplicatedUpdate::load_state(const CheckpointSource& source, bool with_state, int64_t step) {
  std::vector<nn::NamedTensor> state;
  if (with_state)
    for (const auto& [name, p] : weights())
      for (const char* suffix : {".exp_avg", ".exp_avg_sq"}) state.emplace_back(name + suffix, source.whole(name + suffix, name));
  optimizer_->load_state(state, step);
  // Error feedback is this rank's own (Note [Checkpoints from placements] in train/checkpoint_pieces.h).
  if (onebit_) onebit_->load_state(source.of_rank, step);
  for (auto& dp : dp_) dp->reducer().load_state(source.of_rank, step);
}

std::vector<HeldPiece> ReplicatedUpdate::held_pieces() {
  // Every tensor whole, the same on every rank of its group.
  std::vector<HeldPiece> out;
  auto add = [&](const std::string& tensor, const std::string& param, const Tensor& t) {
    out.push_back({tensor, param, 0, t.numel(), false, t, {}});
  };
  for (const auto& [name, t] : weights()) add(name, name, t);
  for (const auto& [name, t] : optimizer_->state()) add(name, parameter_of_state(name), t);
  return out;
}

std::vector<nn::NamedTensor> ReplicatedUpdate::rank_state() const {
  std::vector<nn::NamedTensor> out;
  if (onebit_) out = onebit_->state();
  for (auto& dp : dp_)
    for (auto& t : dp->reducer().state()) out.push_back(std::move(t));
  return out;
}

}  // namespace trident::parallel
