#include "parallel/tp_collectives.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/functions.h"
#include "autograd/record.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/views.h"

namespace trident::parallel {
using namespace autograd;

TRI_REGISTER_OP(kCopyToTp, "copy_to_tp");
TRI_REGISTER_OP(kReduceFromTp, "reduce_from_tp");
TRI_REGISTER_OP(kGatherFromTp, "gather_from_tp");
TRI_REGISTER_OP(kVocabParallelCrossEntropy, "vocab_parallel_cross_entropy");
TRI_REGISTER_OP(kGatherSequence, "gather_sequence");
TRI_REGISTER_OP(kReduceScatterSequence, "reduce_scatter_sequence");

namespace {

Tensor all_reduced(const Tensor& x, comm::Communicator& comm) {
  Tensor out = core::clone(x);  // contiguous, and never the caller's storage
  comm.all_reduce(out);
  return out;
}

// (B, T/n, ...) blocks of the ranks -> (B, T, ...), in rank order along T.
Tensor all_gather_dim1(const Tensor& x, comm::Communicator& comm) {
  const int64_t n = comm.size();
  std::vector<int64_t> blocks = x.shape().vec();
  blocks.insert(blocks.begin(), n);  // (n, B, T/n, ...)
  Tensor gathered = empty(Shape(blocks), x.dtype());
  comm.all_gather(core::contiguous(x), gathered);
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
  Tensor out = empty(Shape(shape), x.dtype());
  comm.reduce_scatter(blocks, out);
  return out;
}

}  // namespace

Tensor gather_sequence(const Tensor& x, comm::Communicator& comm) {
  Tensor out = all_gather_dim1(x, comm);
  if (needs_grad({x}))
    record(kGatherSequence, {x}, {out},
           [c = &comm](const BackwardContext& ctx) { return GradList{reduce_scatter_dim1(ctx.grad(), *c)}; });
  return out;
}

Tensor reduce_scatter_sequence(const Tensor& x, comm::Communicator& comm) {
  Tensor out = reduce_scatter_dim1(x, comm);
  if (needs_grad({x}))
    record(kReduceScatterSequence, {x}, {out},
           [c = &comm](const BackwardContext& ctx) { return GradList{all_gather_dim1(ctx.grad(), *c)}; });
  return out;
}

Tensor copy_to_tp(const Tensor& x, comm::Communicator& comm) {
  if (!needs_grad({x})) return x;
  Tensor out = detach(x);
  record(kCopyToTp, {x}, {out}, [c = &comm](const BackwardContext& ctx) { return GradList{all_reduced(ctx.grad(), *c)}; });
  return out;
}

Tensor reduce_from_tp(const Tensor& x, comm::Communicator& comm) {
  Tensor out = all_reduced(x, comm);
  if (needs_grad({x})) record(kReduceFromTp, {x}, {out}, [](const BackwardContext& ctx) { return GradList{ctx.grad()}; });
  return out;
}

Tensor gather_from_tp(const Tensor& x, comm::Communicator& comm, const std::vector<int64_t>& widths) {
  const int n = comm.size(), r = comm.rank();
  TRI_CHECK(static_cast<int>(widths.size()) == n && widths[static_cast<size_t>(r)] == x.size(-1),
            "gather_from_tp: rank ", r, " has width ", x.size(-1), ", the widths given are ", widths.size(), " long");
  const int64_t pad = *std::max_element(widths.begin(), widths.end());
  const int64_t rows = x.numel() / x.size(-1);
  // Pad this rank's block to the widest, gather (n, rows, pad), keep each rank's columns.
  Tensor mine = zeros({rows, pad}, x.dtype());
  core::copy_(views::narrow(mine, 1, 0, x.size(-1)), views::view(core::contiguous(x), {rows, x.size(-1)}));
  Tensor all = empty({n, rows, pad}, x.dtype());
  comm.all_gather(mine, all);
  std::vector<int64_t> shape = x.shape().vec();
  int64_t total = 0;
  for (int64_t w : widths) total += w;
  shape.back() = total;
  Tensor out = empty(Shape(shape), x.dtype());
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
  TRI_CHECK(logits.dim() == 2, "vocab_parallel_cross_entropy: logits must be (N, V_local), got ", logits.shape());
  const int64_t N = logits.size(0), V = logits.size(1);
  TRI_CHECK(targets.numel() == N, "vocab_parallel_cross_entropy: ", targets.numel(), " targets for ", N, " rows");
  const Tensor l = core::contiguous(core::cast(logits, DType::kF32));
  const Tensor t = core::contiguous(core::cast(views::view(core::contiguous(targets), {N}), DType::kI64));
  const float* lp = l.data_ptr<float>();
  const int64_t* tp = t.data_ptr<int64_t>();
  // Row maxima over the whole vocabulary, then sums of exp(l - max) and target logits.
  Tensor row_max = empty({N}, DType::kF32);
  float* mp = row_max.data_ptr<float>();
  for (int64_t i = 0; i < N; ++i) {
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < V; ++j) m = std::max(m, lp[i * V + j]);
    mp[i] = m;
  }
  comm.all_reduce(row_max, comm::ReduceOp::kMax);
  Tensor sums = zeros({2, N}, DType::kF64);  // exp sums; target logit - max
  double* sp = sums.data_ptr<double>();
  int64_t count = 0;
  for (int64_t i = 0; i < N; ++i) {
    double s = 0.0;
    for (int64_t j = 0; j < V; ++j) s += std::exp(static_cast<double>(lp[i * V + j] - mp[i]));
    sp[i] = s;
    const int64_t target = tp[i];
    if (target != -1) ++count;
    if (target >= vocab_begin && target < vocab_begin + V) sp[N + i] = static_cast<double>(lp[i * V + (target - vocab_begin)] - mp[i]);
  }
  comm.all_reduce(sums);
  double total = 0.0;
  for (int64_t i = 0; i < N; ++i)
    if (tp[i] != -1) total += std::log(sp[i]) - sp[N + i];
  Tensor loss = scalar_tensor(count > 0 ? total / static_cast<double>(count) : std::nan(""), DType::kF32);
  if (needs_grad({logits})) {
    record(kVocabParallelCrossEntropy, {logits}, {loss},
           [l, t, row_max, sums, vocab_begin, count, dtype = logits.dtype()](const BackwardContext& ctx) {
             const int64_t n = l.size(0), v = l.size(1);
             const double scale = ctx.grad().item() / static_cast<double>(count);
             Tensor g = empty({n, v}, DType::kF32);
             float* gp = g.data_ptr<float>();
             const float* lp2 = l.data_ptr<float>();
             const int64_t* tp2 = t.data_ptr<int64_t>();
             const float* mp2 = row_max.data_ptr<float>();
             const double* sp2 = sums.data_ptr<double>();
             for (int64_t i = 0; i < n; ++i) {
               const bool ignored = tp2[i] == -1;
               for (int64_t j = 0; j < v; ++j) {
                 const double p = std::exp(static_cast<double>(lp2[i * v + j] - mp2[i])) / sp2[i];
                 const double onehot = tp2[i] == vocab_begin + j ? 1.0 : 0.0;
                 gp[i * v + j] = ignored ? 0.0f : static_cast<float>((p - onehot) * scale);
               }
             }
             return GradList{dtype == DType::kF32 ? g : core::cast(g, dtype)};
           });
  }
  return loss;
}

}  // namespace trident::parallel
