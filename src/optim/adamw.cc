#include "optim/adamw.h"

#include "autograd/grad_mode.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/profiler.h"
#include "ops/optim.h"

namespace trident::optim {

const OptionTable<AdamWOptions>& AdamWOptions::table() {
  static const auto t =
      OptionTable<AdamWOptions>("optim", "AdamW optimizer (torch.optim.AdamW semantics)")
          .add("lr", &AdamWOptions::lr, "peak learning rate", Range::positive())
          .add("beta1", &AdamWOptions::beta1, "first-moment decay", Range::between(0.0, 0.9999999))
          .add("beta2", &AdamWOptions::beta2, "second-moment decay", Range::between(0.0, 0.9999999))
          .add("eps", &AdamWOptions::eps, "denominator epsilon", Range::positive())
          .add("weight_decay", &AdamWOptions::weight_decay, "decoupled weight decay (params with >= 2 dims)",
               Range::non_negative())
          .add("grad_clip", &AdamWOptions::grad_clip, "max global gradient norm; 0 disables clipping",
               Range::non_negative());
  return t;
}

AdamW::AdamW(std::vector<nn::NamedTensor> params, const AdamWOptions& options) : options_(options) {
  for (auto& [name, p] : params) {
    TRI_CHECK(p.is_contiguous(), "AdamW: parameter '", name, "' must be contiguous");
    slots_.push_back(Slot{name, p, p.dim() >= 2, std::nullopt, std::nullopt});
  }
}

void AdamW::update(double lr, const std::vector<Slot*>& slots, bool decay, const std::vector<Tensor>* models) {
  std::vector<Tensor> params, grads, ms, vs, outs;
  for (Slot* s : slots) {
    if (s->decay != decay || !s->param.grad().has_value()) continue;
    if (!s->m) {
      s->m = zeros(s->param.shape(), DType::kF32, s->param.device());
      s->v = zeros(s->param.shape(), DType::kF32, s->param.device());
    }
    params.push_back(s->param);
    grads.push_back(*s->param.grad());
    ms.push_back(*s->m);
    vs.push_back(*s->v);
    if (models) outs.push_back((*models)[static_cast<size_t>(s - slots_.data())]);
  }
  const kernels::cpu::AdamWStep step{
      lr, options_.beta1, options_.beta2, options_.eps, decay ? options_.weight_decay : 0.0, step_};
  if (models) ops::adamw_update_multi_(params, grads, ms, vs, step, outs);
  else ops::adamw_update_multi_(params, grads, ms, vs, step);
}

void AdamW::step(double lr) { step_all(lr, nullptr); }

void AdamW::step_into(double lr, const std::vector<Tensor>& models) {
  TRI_CHECK(models.size() == slots_.size(), "AdamW::step_into: ", slots_.size(), " parameters, ", models.size(),
            " model tensors");
  autograd::NoGradGuard no_grad;  // the model tensors are leaves that require grad
  step_all(lr, &models);
}

void AdamW::step_all(double lr, const std::vector<Tensor>* models) {
  profiler::ProfileScope scope("adamw.step", profiler::Phase::kOptimizer);
  ++step_;
  MemoryCategoryGuard guard(MemoryCategory::kOptimizerState);
  std::vector<Slot*> all;
  for (Slot& s : slots_) all.push_back(&s);
  // Two multi-tensor updates, with and without weight decay (one launch each on a GPU).
  for (const bool decay : {true, false}) update(lr, all, decay, models);
  if (models == nullptr) return;
  for (size_t k = 0; k < slots_.size(); ++k)  // not updated: copied as they are
    if (!slots_[k].param.grad().has_value()) core::copy_((*models)[k], slots_[k].param);
}

void AdamW::step(double lr, const std::function<void(size_t)>& updated) {
  profiler::ProfileScope scope("adamw.step", profiler::Phase::kOptimizer);
  ++step_;
  MemoryCategoryGuard guard(MemoryCategory::kOptimizerState);
  for (size_t k = 0; k < slots_.size(); ++k) {
    update(lr, {&slots_[k]}, slots_[k].decay);
    updated(k);
  }
}

std::vector<nn::NamedTensor> AdamW::state() const {
  std::vector<nn::NamedTensor> out;
  for (const Slot& s : slots_) {
    if (!s.m) continue;
    out.emplace_back(s.name + ".exp_avg", *s.m);
    out.emplace_back(s.name + ".exp_avg_sq", *s.v);
  }
  return out;
}

void AdamW::load_state(const std::vector<nn::NamedTensor>& state, int64_t step) {
  MemoryCategoryGuard guard(MemoryCategory::kOptimizerState);
  for (Slot& s : slots_) {
    std::optional<Tensor> m, v;
    for (const auto& [name, t] : state) {
      if (name == s.name + ".exp_avg") m = t;
      if (name == s.name + ".exp_avg_sq") v = t;
    }
    TRI_CHECK(m.has_value() == v.has_value(), "AdamW state for '", s.name, "' has only one of exp_avg/exp_avg_sq");
    if (!m) {
      TRI_CHECK(step == 0, "AdamW state has no entry for parameter '", s.name, "' at step ", step);
      continue;
    }
    TRI_CHECK(m->shape() == s.param.shape() && v->shape() == s.param.shape(), "AdamW state for '", s.name,
              "' has shape ", m->shape(), "; the parameter has shape ", s.param.shape());
    s.m = core::to_device(core::cast(*m, DType::kF32), s.param.device());
    s.v = core::to_device(core::cast(*v, DType::kF32), s.param.device());
    if (s.m->is_same(*m)) s.m = core::clone(*m);
    if (s.v->is_same(*v)) s.v = core::clone(*v);
  }
  step_ = step;
}

}  // namespace trident::optim
