#include "parallel/expert_parallel.h"

#include <chrono>
#include <numeric>

#include "autograd/functions.h"
#include "autograd/record.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/profiler.h"
#include "moe/sparse_moe.h"
#include "ops/optim.h"

namespace trident::parallel {
using namespace autograd;

TRI_REGISTER_OP(kAllToAllRows, "all_to_all_rows");

void ExchangeCost::add(int64_t bytes, double seconds) const {
  if (aux == nullptr) return;
  const double b[] = {static_cast<double>(bytes)}, t[] = {seconds};
  aux->add_layer_cost(layer, "moe_all_to_all_bytes", b);
  aux->add_layer_cost(layer, "moe_all_to_all_seconds", t);
}

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

Tensor exchange_rows(const Tensor& x, const std::vector<int64_t>& send_rows, const std::vector<int64_t>& recv_rows,
                     comm::Communicator& comm, const ExchangeCost& cost) {
  const auto start = Clock::now();
  const int64_t C = x.size(1);
  std::vector<int64_t> send(send_rows.size()), recv(recv_rows.size());
  for (size_t i = 0; i < send.size(); ++i) send[i] = send_rows[i] * C;
  for (size_t i = 0; i < recv.size(); ++i) recv[i] = recv_rows[i] * C;
  const int64_t rows = std::accumulate(recv_rows.begin(), recv_rows.end(), int64_t{0});
  Tensor out = empty({rows, C}, x.dtype(), x.device());
  profiler::ProfileScope scope("ep.all_to_all", profiler::Phase::kCommunication);
  comm.all_to_all_v(core::contiguous(x), send, out, recv);
  // The rows that left this rank (Note [Exchange cost per layer]).
  int64_t away = 0;
  for (size_t j = 0; j < send.size(); ++j)
    if (static_cast<int>(j) != comm.rank()) away += send[j];
  cost.add(away * static_cast<int64_t>(element_size(x.dtype())), seconds_since(start));
  return out;
}

}  // namespace

Tensor all_to_all_rows(const Tensor& x, const std::vector<int64_t>& send_rows, const std::vector<int64_t>& recv_rows,
                       comm::Communicator& comm, double grad_scale, ExchangeCost cost) {
  TRI_PROFILE_OP(kAllToAllRows);
  TRI_CHECK(x.dim() == 2, "all_to_all_rows: expected rows (N, C), got ", x.shape());
  Tensor out = exchange_rows(x, send_rows, recv_rows, comm, cost);
  if (needs_grad({x}))
    record(kAllToAllRows, {x}, {out},
           [send_rows, recv_rows, c = &comm, grad_scale, cost](const BackwardContext& ctx) {
             Tensor g = exchange_rows(ctx.grad(), recv_rows, send_rows, *c, cost);
             if (grad_scale != 1.0) ops::scale_(g, grad_scale);
             return GradList{std::move(g)};
           });
  return out;
}

AllToAllExperts::AllToAllExperts(comm::Communicator& comm, int64_t experts, ExchangeCost cost)
    : comm_(comm),
      experts_(experts),
      count_(experts / comm.size()),
      first_(comm.rank() * (experts / comm.size())),
      cost_(cost) {
  TRI_CHECK(experts % comm.size() == 0, "expert parallelism: ", comm.size(), " ranks must divide the ", experts,
            " experts");
}

Tensor AllToAllExperts::run(const Tensor& xs, const std::vector<int64_t>& counts, const moe::LocalExperts& local) const {
  const int n = comm_.size();
  TRI_CHECK(static_cast<int64_t>(counts.size()) == experts_, "expert parallelism: ", counts.size(),
            " expert counts for ", experts_, " experts");
  // (1) The counts: block d of the E counts goes to rank d; back come rank s's counts of mine.
  Tensor mine = empty({experts_}, DType::kI64);
  {
    const Tensor all = from_vector(counts, {experts_});
    profiler::ProfileScope scope("ep.all_to_all", profiler::Phase::kCommunication);
    const auto start = Clock::now();
    comm_.all_to_all(all, mine);
    cost_.add(0, seconds_since(start));  // the counts' bytes are left out
  }
  const std::vector<int64_t> from = to_vector<int64_t>(mine);  // [source][local expert]
  std::vector<int64_t> send_rows(static_cast<size_t>(n), 0), recv_rows(static_cast<size_t>(n), 0);
  for (int d = 0; d < n; ++d)
    for (int64_t e = 0; e < count_; ++e) {
      send_rows[static_cast<size_t>(d)] += counts[static_cast<size_t>(d * count_ + e)];
      recv_rows[static_cast<size_t>(d)] += from[static_cast<size_t>(d * count_ + e)];
    }
  // (2) The rows to their experts' ranks. Their gradient goes back to the tokens times n,
  // undoing (4)'s 1 / n (Note [Expert gradients over expert parallelism]).
  const Tensor arrived = all_to_all_rows(xs, send_rows, recv_rows, comm_, static_cast<double>(n), cost_);
  // (3) By local expert: row order [expert][source] instead of [source][expert].
  std::vector<int64_t> start(static_cast<size_t>(n * count_));  // first row of block (source, expert)
  for (int64_t i = 0, at = 0; i < n * count_; ++i) {
    start[static_cast<size_t>(i)] = at;
    at += from[static_cast<size_t>(i)];
  }
  std::vector<int64_t> order, offsets = {0};
  for (int64_t e = 0; e < count_; ++e) {
    for (int s = 0; s < n; ++s) {
      const size_t block = static_cast<size_t>(s * count_ + e);
      for (int64_t r = 0; r < from[block]; ++r) order.push_back(start[block] + r);
    }
    offsets.push_back(static_cast<int64_t>(order.size()));
  }
  Tensor index = from_vector(order, {static_cast<int64_t>(order.size())});
  if (!xs.device().is_cpu()) index = core::to_device(index, xs.device());
  const Tensor grouped = trident::embedding(arrived, index);
  const Tensor out = local(grouped, offsets);
  const Tensor by_source = trident::scatter_add_rows(out, index, arrived.size(0));
  // (4) Back to the rows' ranks; the gradient going to the experts is scaled by 1 / n.
  return all_to_all_rows(by_source, recv_rows, send_rows, comm_, 1.0 / static_cast<double>(n), cost_);
}

int64_t apply_expert_parallel(models::CausalLM& model, comm::Communicator& ep) {
  int64_t layers = 0;
  std::shared_ptr<const AllToAllExperts> dispatch;
  for (const auto& [path, module] : model.named_modules()) {
    auto* moe = dynamic_cast<moe::SparseMoe*>(module);
    if (moe == nullptr) continue;
    // One per layer, for its cost: Note [Exchange cost per layer].
    dispatch = std::make_shared<AllToAllExperts>(ep, moe->config().experts,
                                                 ExchangeCost{&model.aux_outputs(), moe->layer()});
    moe->set_dispatch(dispatch);
    ++layers;
  }
  // Other ranks' experts: never used here.
  autograd::NoGradGuard no_grad;
  for (auto& [name, p] : model.named_parameters()) {
    const int64_t e = model.expert_of(name);
    if (e >= 0 && dispatch && (e < dispatch->first() || e >= dispatch->first() + dispatch->count()))
      p.set_data(empty({0}, p.dtype()));
  }
  return layers;
}

}  // namespace trident::parallel
