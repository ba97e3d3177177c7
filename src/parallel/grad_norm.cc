#include "parallel/grad_norm.h"

#include <cmath>

#include "core/factory.h"
#include "core/profiler.h"
#include "ops/elementwise.h"
#include "ops/optim.h"

namespace trident::parallel {

double clip_grad_norm_sharded(const std::vector<nn::NamedTensor>& params, const PlacementTable* placements,
                              comm::Communicator* tp, comm::Communicator* pp, double max_norm,
                              comm::Communicator* ep) {
  profiler::ProfileScope scope("clip_grad_norm", profiler::Phase::kOptimizer);
  std::vector<Tensor> split, replicated, experts;
  for (const auto& [name, p] : params) {
    if (!p.grad().has_value()) continue;
    const ParamPlacement* row = placements != nullptr ? &placements->at(name) : nullptr;
    (row != nullptr && row->tp_split() ? split : ep != nullptr && row != nullptr && row->on_ep_rank() ? experts
                                                                                                     : replicated)
        .push_back(*p.grad());
  }
  Tensor split_sq = full({1}, ops::sum_of_squares(split), DType::kF64);
  if (tp != nullptr) {
    profiler::ProfileScope comm_scope("tp.all_reduce", profiler::Phase::kCommunication);
    tp->all_reduce(split_sq);
  }
  Tensor expert_sq = full({1}, ops::sum_of_squares(experts), DType::kF64);
  if (ep != nullptr) {
    profiler::ProfileScope comm_scope("ep.all_reduce", profiler::Phase::kCommunication);
    ep->all_reduce(expert_sq);
  }
  Tensor sq = full({1}, split_sq.item() + expert_sq.item() + ops::sum_of_squares(replicated), DType::kF64);
  if (pp != nullptr) {
    profiler::ProfileScope comm_scope("pp.all_reduce", profiler::Phase::kCommunication);
    pp->all_reduce(sq);
  }
  const double norm = std::sqrt(sq.item());
  if (max_norm > 0.0) {
    const double coef = max_norm / (norm + 1e-6);  // as torch.nn.utils.clip_grad_norm_
    if (coef < 1.0) {
      for (const Tensor& g : split) ops::scale_(g, coef);
      for (const Tensor& g : experts) ops::scale_(g, coef);
      for (const Tensor& g : replicated) ops::scale_(g, coef);
    }
  }
  return norm;
}

}  // namespace trident::parallel
