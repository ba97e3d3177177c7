#include "parallel/zero_update.h"

#include <cmath>
#include <limits>

#include "core/check.h"
#include "core/factory.h"
#include "core/profiler.h"
#include "core/views.h"
#include "offload/nvme_file.h"
#include "parallel/zero/parameters.h"

namespace trident::parallel {

ZeroUpdate::ZeroUpdate(std::vector<std::unique_ptr<ZeroOptimizer>> groups, comm::Communicator* tp,
                       comm::Communicator* pp)
    : groups_(std::move(groups)), tp_(tp), pp_(pp) {}

void ZeroUpdate::begin_backward(bool last) {
  for (auto& z : groups_) {
    if (z->reducer()) z->reducer()->set_step(z->step_count());
    z->begin_backward(last);
  }
}

void ZeroUpdate::end_backward() {
  for (auto& z : groups_) z->end_backward();
}

void ZeroUpdate::add_grad(const std::string& name, const Tensor& grad) {
  for (auto& z : groups_)
    if (z->holds(name)) return z->add_grad(name, grad);
  TRI_CHECK(false, "ZeRO: no parameter named '", name, "'");
}

StepOutcome ZeroUpdate::step(const StepContext& ctx) {
  // ZeRO unscales fp16's gradients while it measures their norm; a non-finite norm is an
  // overflow. Every rank decides alike: the replicated parameters' squares are not summed
  // over tensor parallelism, so the norm need not be bit-identical across its ranks.
  StepOutcome out;
  const bool by_split = tp_ != nullptr || pp_ != nullptr || ep_ != nullptr;
  double sq[2] = {0.0, 0.0}, expert_sq = 0.0;
  for (size_t k = 0; k < groups_.size(); ++k) {
    const std::array<double, 2> g = groups_[k]->grad_squares(by_split);
    if (ep_ != nullptr && expert_groups_[k]) {
      expert_sq += g[0] + g[1];  // one ep rank's experts: summed over ep below
      continue;
    }
    sq[0] += g[0];
    sq[1] += g[1];
  }
  double norm = 0.0;
  if (!by_split) {
    norm = std::sqrt(sq[1]);
  } else {
    profiler::ProfileScope comm_scope("zero.all_reduce", profiler::Phase::kCommunication);
    if (ep_ != nullptr) {
      Tensor e = from_vector(std::vector<double>{expert_sq}, Shape{1});
      ep_->all_reduce(e);
      sq[1] += e.item();
    }
    Tensor t = from_vector(std::vector<double>{sq[0], sq[1]}, Shape{2});
    if (tp_ != nullptr) {
      Tensor split = views::narrow(t, 0, 0, 1);
      tp_->all_reduce(split);
    }
    if (pp_ != nullptr) pp_->all_reduce(t);
    const std::vector<double> v = to_vector<double>(t);
    norm = std::sqrt(v[0] + v[1]);
  }
  if (std::isfinite(norm)) {  // else overflowed: the step is skipped below, the shards left alone
    const double grad_scale = ctx.scaler->scale();
    norm /= grad_scale;
    double factor = 1.0 / grad_scale;
    if (ctx.max_norm > 0.0) {
      const double coef = ctx.max_norm / (norm + 1e-6);  // as torch.nn.utils.clip_grad_norm_
      if (coef < 1.0) factor *= coef;
    }
    for (auto& z : groups_) z->scale_grads(factor);
  }
  out.grad_norm = norm;
  const bool apply = !ctx.loss_scaling || ctx.scaler->update(!ctx.all_ranks(std::isfinite(out.grad_norm)));
  for (auto& z : groups_) {
    if (apply) z->step(ctx.lr);
    else z->skip_step();
  }
  steps_ += apply ? 1 : 0;
  if (!apply) out.grad_norm = std::numeric_limits<double>::quiet_NaN();  // not measured: the gradients overflowed
  out.skipped = !apply;
  return out;
}

void ZeroUpdate::load_state(const CheckpointSource& source, bool with_state, int64_t step) {
  // This rank's partition of each tensor, read from whichever pieces the writer left.
  steps_ = step;
  for (auto& z : groups_) {
    z->load(source.range, with_state, step);
    if (z->reducer()) z->reducer()->load_state(source.of_rank, step);
  }
}

std::vector<HeldPiece> ZeroUpdate::held_pieces() {
  // This rank's partition of every tensor: flat ranges of each parameter (its fp32 masters
  // under mixed precision) and of its AdamW state.
  std::vector<HeldPiece> out;
  for (auto& z : groups_)
    for (ZeroOptimizer::Piece& p : z->pieces())
      out.push_back({p.name, parameter_of_state(p.name), p.begin, p.end, true, p.values, p.load});
  return out;
}

std::vector<nn::NamedTensor> ZeroUpdate::rank_state() const {
  std::vector<nn::NamedTensor> out;
  for (const auto& z : groups_)
    if (z->reducer())
      for (auto& t : z->reducer()->state()) out.push_back(std::move(t));
  return out;
}

Tensor ZeroUpdate::run(size_t part, const nn::PartForward& forward, const Tensor& x) {
  return run_from(0, part, forward, x);
}

Tensor ZeroUpdate::run_from(size_t g, size_t part, const nn::PartForward& forward, const Tensor& x) {
  if (g + 1 == groups_.size()) return groups_[g]->run(part, forward, x);
  return groups_[g]->run(part, [&](const Tensor& y) { return run_from(g + 1, part, forward, y); }, x);
}

// Both tiers' traffic together (the optimizer state's and ZeRO-3's parameters'): what this
// rank asked of its disk.
std::optional<UpdateStrategy::TierTraffic> ZeroUpdate::tier_traffic() const {
  std::optional<TierTraffic> out;
  const auto add = [&out](int64_t read, int64_t written, double wait_s) {
    if (!out) out = TierTraffic{};
    out->read_bytes += read;
    out->written_bytes += written;
    out->wait_s += wait_s;
  };
  for (const auto& z : groups_) {
    if (!z->state().resident()) add(z->state().bytes_read(), z->state().bytes_written(), z->state().wait_seconds());
    if (const offload::NvmeFile* f = z->parameters().tier_file())
      add(f->bytes_read(), f->bytes_written(), f->wait_seconds());
  }
  return out;
}

}  // namespace trident::parallel
