#include "parallel/tp_collectives.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/functions.h"
#include "autograd/record.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/profiler.h"
#include "core/views.h"
#include "ops/vocab_parallel.h"

namespace trident::parallel {
using namespace autograd;

TRI_REGISTER_OP(kCopyToTp, "copy_to_tp");
TRI_REGISTER_OP(kReduceFromTp, "reduce_from_tp");
TRI_REGISTER_OP(kGatherFromTp, "gather_from_tp");
TRI_REGISTER_OP(kVocabParallelCrossEntropy, "vocab_parallel_cross_entropy");
TRI_REGISTER_OP(kGatherSequence, "gather_sequence");
TRI_REGISTER_OP(kReduceScatterSequence, "reduce_scatter_sequence");
TRI_REGISTER_OP(kGatherWholeSequence, "gather_whole_sequence");
TRI_REGISTER_OP(kSplitSequence, "split_sequence");

namespace {

Tensor all_reduced(const Tensor& x, comm::Communicator& comm) {
  Tensor out = core::clone(x);  // contiguous, and never the caller's storage
  profiler::ProfileScope scope("tp.all_reduce", profiler::Phase::kCommunication);
  comm.all_reduce(out);
  return out;
}

// (B, T/n, ...) blocks of the ranks -> (B, T, ...), in rank order along T.
Tensor all_gather_dim1(const Tensor& x, comm::Communicator& comm) {
  const int64_t n = comm.size();
  std::vector<int64_t> blocks = x.shape().vec();
  blocks.insert(blocks.begin(), n);  // (n, B, T/n, ...)
  Tensor gathered = empty(Shape(blocks), x.dtype(), x.device());
  {
    profiler::ProfileScope scope("tp.all_gather", profiler::Phase::kCommunication);
    comm.all_gather(core::contiguous(x), gathered);
  }
  std::vector<int64_t> order(blocks.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  std::swap(order[0], order[1]);  // (B, n, T/n, ...)
  std::vector<int64_t> shape = x.shape().vec();
  shape[1] *= n;
  return views::view(core::contiguous(views::permute(gathered, order)), shape);
}

// (B, T, ...) summed over the ranks; this rank keeps its block of T: (B, T/n, ...).
Tensor reduce_scatter_dim1(const Tensor& x, comm::Communicator& comm) {
  const int64_t n = comm.size();
  TRI_CHECK(x.dim() >= 2 && x.size(1) % n == 0, "sequence parallelism: the sequence length ", x.dim() >= 2 ? x.size(1) : 0,
            " must be divisible by the ", n, " tensor-parallel ranks");
  std::vector<int64_t> split = x.shape().vec();
  split[1] /= n;
  split.insert(split.begin() + 1, n);  // (B, n, T/n, ...)
  std::vector<int64_t> order(split.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  std::swap(order[0], order[1]);  // (n, B, T/n, ...)
  const Tensor blocks = core::contiguous(views::permute(views::view(core::contiguous(x), split), order));
  std::vector<int64_t> shape = x.shape().vec();
  shape[1] /= n;
  Tensor out = empty(Shape(shape), x.dtype(), x.device());
  profiler::ProfileScope scope("tp.reduce_scatter", profiler::Phase::kCommunication);
  comm.reduce_scatter(blocks, out);
  return out;
}

// This rank's block of dim 1 of (B, T, ...): (B, T/n, ...), contiguous.
Tensor block_of_dim1(const Tensor& x, comm::Communicator& comm) {
  const int64_t n = comm.size();
  TRI_CHECK(x.dim() >= 2 && x.size(1) % n == 0, "sequence parallelism: the sequence length ", x.dim() >= 2 ? x.size(1) : 0,
            " must be divisible by the ", n, " tensor-parallel ranks");
  const int64_t t = x.size(1) / n;
  return core::contiguous(views::narrow(x, 1, comm.rank() * t, t));
}

}  // namespace

Tensor gather_whole_sequence(const Tensor& x, comm::Communicator& comm) {
  TRI_PROFILE_OP(kGatherWholeSequence);
  Tensor out = all_gather_dim1(x, comm);
  if (needs_grad({x}))
    record(kGatherWholeSequence, {x}, {out},
           [c = &comm](const BackwardContext& ctx) { return GradList{block_of_dim1(ctx.grad(), *c)}; });
  return out;
}

Tensor split_sequence(const Tensor& x, comm::Communicator& comm) {
  TRI_PROFILE_OP(kSplitSequence);
  Tensor out = block_of_dim1(x, comm);
  if (needs_grad({x}))
    record(kSplitSequence, {x}, {out},
           [c = &comm](const BackwardContext& ctx) { return GradList{all_gather_dim1(ctx.grad(), *c)}; });
  return out;
}

Tensor gather_sequence(const Tensor& x, comm::Communicator& comm) {
  TRI_PROFILE_OP(kGatherSequence);
  Tensor out = all_gather_dim1(x, comm);
  if (needs_grad({x}))
    record(kGatherSequence, {x}, {out},
           [c = &comm](const BackwardContext& ctx) { return GradList{reduce_scatter_dim1(ctx.grad(), *c)}; });
  return out;
}

Tensor reduce_scatter_sequence(const Tensor& x, comm::Communicator& comm) {
  TRI_PROFILE_OP(kReduceScatterSequence);
  Tensor out = reduce_scatter_dim1(x, comm);
  if (needs_grad({x}))
    record(kReduceScatterSequence, {x}, {out},
           [c = &comm](const BackwardContext& ctx) { return GradList{all_gather_dim1(ctx.grad(), *c)}; });
  return out;
}

Tensor copy_to_tp(const Tensor& x, comm::Communicator& comm) {
  TRI_PROFILE_OP(kCopyToTp);
  if (!needs_grad({x})) return x;
  Tensor out = detach(x);
  record(kCopyToTp, {x}, {out}, [c = &comm](const BackwardContext& ctx) { return GradList{all_reduced(ctx.grad(), *c)}; });
  return out;
}

Tensor reduce_from_tp(const Tensor& x, comm::Communicator& comm) {
  TRI_PROFILE_OP(kReduceFromTp);
  Tensor out = all_reduced(x, comm);
  if (needs_grad({x})) record(kReduceFromTp, {x}, {out}, [](const BackwardContext& ctx) { return GradList{ctx.grad()}; });
  return out;
}

Tensor gather_from_tp(const Tensor& x, comm::Communicator& comm, const std::vector<int64_t>& widths) {
  TRI_PROFILE_OP(kGatherFromTp);
  const int n = comm.size(), r = comm.rank();
  TRI_CHECK(static_cast<int>(widths.size()) == n && widths[static_cast<size_t>(r)] == x.size(-1),
            "gather_from_tp: rank ", r, " has width ", x.size(-1), ", the widths given are ", widths.size(), " long");
  const int64_t pad = *std::max_element(widths.begin(), widths.end());
  const int64_t rows = x.numel() / x.size(-1);
  // Pad this rank's block to the widest, gather (n, rows, pad), keep each rank's columns.
  Tensor mine = zeros({rows, pad}, x.dtype(), x.device());
  core::copy_(views::narrow(mine, 1, 0, x.size(-1)), views::view(core::contiguous(x), {rows, x.size(-1)}));
  Tensor all = empty({n, rows, pad}, x.dtype(), x.device());
  {
    profiler::ProfileScope scope("tp.all_gather", profiler::Phase::kCommunication);
    comm.all_gather(mine, all);
  }
  std::vector<int64_t> shape = x.shape().vec();
  int64_t total = 0;
  for (int64_t w : widths) total += w;
  shape.back() = total;
  Tensor out = empty(Shape(shape), x.dtype(), x.device());
  const Tensor out2d = views::view(out, {rows, total});
  int64_t at = 0;
  for (int k = 0; k < n; ++k) {
    core::copy_(views::narrow(out2d, 1, at, widths[static_cast<size_t>(k)]),
                views::narrow(views::select(all, 0, k), 1, 0, widths[static_cast<size_t>(k)]));
    at += widths[static_cast<size_t>(k)];
  }
  if (needs_grad({x})) {
    int64_t begin = 0;
    for (int k = 0; k < r; ++k) begin += widths[static_cast<size_t>(k)];
    record(kGatherFromTp, {x}, {out}, [begin, width = x.size(-1)](const BackwardContext& ctx) {
      return GradList{core::contiguous(views::narrow(ctx.grad(), ctx.grad().dim() - 1, begin, width))};
    });
  }
  return out;
}

Tensor vocab_parallel_cross_entropy(const Tensor& logits, const Tensor& targets, int64_t vocab_begin,
                                    comm::Communicator& comm) {
  TRI_PROFILE_OP(kVocabParallelCrossEntropy);
  TRI_CHECK(logits.dim() == 2, "vocab_parallel_cross_entropy: logits must be (N, V_local), got ", logits.shape());
  const int64_t N = logits.size(0);
  TRI_CHECK(targets.numel() == N, "vocab_parallel_cross_entropy: ", targets.numel(), " targets for ", N, " rows");
  constexpr int64_t kIgnore = -1;
  // The local passes run where the logits are (ops/vocab_parallel.h); between them, the row
  // maxima over the whole vocabulary, then the sums of exp(l - max) and the target logits.
  const Tensor l = core::contiguous(core::cast(logits, DType::kF32));
  const Tensor t = core::cast(core::contiguous(views::view(core::contiguous(targets), {N})), DType::kI64);
  Tensor row_max = ops::vocab_parallel_row_max(l);
  {
    profiler::ProfileScope scope("tp.all_reduce", profiler::Phase::kCommunication);
    comm.all_reduce(row_max, comm::ReduceOp::kMax);
  }
  Tensor sums = ops::vocab_parallel_sums(l, row_max, t, vocab_begin);
  {
    profiler::ProfileScope scope("tp.all_reduce", profiler::Phase::kCommunication);
    comm.all_reduce(sums);
  }
  // The loss from the (2, N) sums on the host: a row's is log(sum) - (target logit - max).
  const std::vector<double> sp = to_vector<double>(sums);
  const std::vector<int64_t> tp = to_vector<int64_t>(t);
  double total = 0.0;
  int64_t count = 0;
  for (int64_t i = 0; i < N; ++i) {
    if (tp[static_cast<size_t>(i)] == kIgnore) continue;
    ++count;
    total += std::log(sp[static_cast<size_t>(i)]) - sp[static_cast<size_t>(N + i)];
  }
  Tensor loss = core::to_device(scalar_tensor(count > 0 ? total / static_cast<double>(count) : std::nan(""), DType::kF32),
                                logits.device());
  if (needs_grad({logits})) {
    record(kVocabParallelCrossEntropy, {logits}, {loss},
           [l, t, row_max, sums, vocab_begin, count, dtype = logits.dtype()](const BackwardContext& ctx) {
             const double scale = ctx.grad().item() / static_cast<double>(count);
             const Tensor g = ops::vocab_parallel_backward(l, row_max, sums, t, vocab_begin, kIgnore, scale);
             return GradList{dtype == DType::kF32 ? g : core::cast(g, dtype)};
           });
  }
  return loss;
}

}  // namespace trident::parallel
