#include "parallel/tensor_parallel.h"

#include <algorithm>
#include <cmath>

#include "autograd/functions.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/profiler.h"
#include "core/views.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/norm.h"
#include "ops/elementwise.h"
#include "ops/optim.h"
#include "ops/vocab_parallel.h"
#include "parallel/tp_collectives.h"

namespace trident::parallel {
namespace {

// With sequence parallelism (`sp`), activations outside the column/row pairs are split along
// the sequence: entering a column-parallel layer gathers them (gather_sequence), leaving a
// row-parallel one reduce-scatters (reduce_scatter_sequence), and a replicated parameter used
// on this rank's part of the sequence enters through copy_to_tp, so that its gradient sums
// the ranks' parts.

class ColumnParallel final : public nn::Conv1DStyle {
 public:
  ColumnParallel(comm::Communicator& tp, bool sp) : tp_(tp), sp_(sp) {}
  Tensor forward(const Tensor& x, const Tensor& weight, const Tensor& bias, nn::Activation act) const override {
    const Tensor in = sp_ ? gather_sequence(x, tp_) : copy_to_tp(x, tp_);
    // Each rank's output columns are whole features: the activation applies to them locally.
    const Tensor w = trident::transpose(weight, 0, 1);
    return act == nn::Activation::kGeluTanh ? trident::linear_gelu_tanh(in, w, bias) : trident::linear(in, w, bias);
  }

 private:
  comm::Communicator& tp_;
  bool sp_;
};

class RowParallel final : public nn::Conv1DStyle {
 public:
  RowParallel(comm::Communicator& tp, bool sp) : tp_(tp), sp_(sp) {}
  Tensor forward(const Tensor& x, const Tensor& weight, const Tensor& bias, nn::Activation act) const override {
    // The bias once, after the sum of the ranks' partial products, and the activation after it.
    const Tensor partial = trident::linear(x, trident::transpose(weight, 0, 1));
    const Tensor y = sp_ ? reduce_scatter_sequence(partial, tp_) + copy_to_tp(bias, tp_) : reduce_from_tp(partial, tp_) + bias;
    return act == nn::Activation::kGeluTanh ? trident::gelu_tanh(y) : y;
  }

 private:
  comm::Communicator& tp_;
  bool sp_;
};

class VocabParallel final : public nn::EmbeddingStyle {
 public:
  VocabParallel(comm::Communicator& tp, bool sp, int64_t begin, std::vector<int64_t> widths)
      : tp_(tp), sp_(sp), begin_(begin), widths_(std::move(widths)) {}

  Tensor lookup(const Tensor& ids, const Tensor& weight) const override {
    // Ids of other ranks' rows look up row 0 and are masked to zeros; the ranks' results sum
    // to the full lookup. The local ids are formed where the weight is (no host round trip).
    const ops::LocalIds local =
        ops::vocab_parallel_local_ids(core::to_device(ids, weight.device()), begin_, weight.size(0));
    const Tensor rows_here = trident::embedding(weight, local.local) * core::cast(local.mask, weight.dtype());
    return sp_ ? reduce_scatter_sequence(rows_here, tp_) : reduce_from_tp(rows_here, tp_);
  }

  Tensor logits(const Tensor& h, const Tensor& weight) const override {
    return gather_from_tp(trident::linear(enter(h), weight), tp_, widths_);
  }

  Tensor loss(const Tensor& h, const Tensor& weight, const Tensor& targets) const override {
    const Tensor full = enter(h);
    const Tensor h2 = trident::reshape(full, {-1, full.size(-1)});
    return vocab_parallel_cross_entropy(trident::linear(h2, weight), targets, begin_, tp_);
  }

 private:
  // The head's input, whole on every rank.
  Tensor enter(const Tensor& h) const { return sp_ ? gather_sequence(h, tp_) : copy_to_tp(h, tp_); }

  comm::Communicator& tp_;
  bool sp_;
  int64_t begin_;
  std::vector<int64_t> widths_;
};

// Sequence parallelism's position embedding: this rank's part of the positions.
class SequenceSplitEmbedding final : public nn::EmbeddingStyle {
 public:
  explicit SequenceSplitEmbedding(comm::Communicator& tp) : tp_(tp) {}
  Tensor lookup(const Tensor& ids, const Tensor& weight) const override {
    const int64_t T = ids.size(-1), n = tp_.size();
    TRI_CHECK(T % n == 0, "sequence parallelism: the sequence length ", T, " must be divisible by parallel.tp (", n, ")");
    return trident::embedding(copy_to_tp(weight, tp_), views::narrow(ids, ids.dim() - 1, tp_.rank() * (T / n), T / n));
  }
  Tensor logits(const Tensor&, const Tensor&) const override {
    TRI_CHECK(false, "sequence parallelism: the position embedding is not an output head");
  }
  Tensor loss(const Tensor&, const Tensor&, const Tensor&) const override {
    TRI_CHECK(false, "sequence parallelism: the position embedding is not an output head");
  }

 private:
  comm::Communicator& tp_;
};

class SequenceSplitLayerNorm final : public nn::LayerNormStyle {
 public:
  explicit SequenceSplitLayerNorm(comm::Communicator& tp) : tp_(tp) {}
  Tensor forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) const override {
    return trident::layernorm(x, copy_to_tp(weight, tp_), copy_to_tp(bias, tp_), eps);
  }

 private:
  comm::Communicator& tp_;
};

}  // namespace

std::pair<int64_t, int64_t> TensorParallelPlan::range(int64_t extent, int r) const {
  // The first extent % n ranks get one more: every range is non-empty when extent >= n.
  const int64_t base = extent / size_, extra = extent % size_;
  return {r * base + std::min<int64_t>(r, extra), base + (r < extra ? 1 : 0)};
}

Tensor TensorParallelPlan::local_from_full(const std::string& name, const Tensor& full) const {
  const auto it = splits_.find(name);
  if (it == splits_.end()) return full;
  const TensorSplit& s = it->second;
  TRI_CHECK(full.shape() == full_shapes_.at(name), "tensor parallel: '", name, "' has shape ", full.shape(),
            "; the model's is ", full_shapes_.at(name));
  const int64_t block = full.size(s.dim) / s.blocks;
  const auto [begin, length] = range(block, rank_);
  std::vector<int64_t> shape = full.shape().vec();
  shape[static_cast<size_t>(s.dim)] = length * s.blocks;
  Tensor local = empty(Shape(shape), full.dtype());
  for (int64_t b = 0; b < s.blocks; ++b)
    core::copy_(views::narrow(local, s.dim, b * length, length), views::narrow(full, s.dim, b * block + begin, length));
  return local;
}

std::vector<TensorParallelPlan::Box> TensorParallelPlan::boxes(const std::string& name, const Tensor& local) const {
  const auto it = splits_.find(name);
  if (it == splits_.end()) return {{std::vector<int64_t>(static_cast<size_t>(local.dim()), 0), local}};
  const TensorSplit& s = it->second;
  const int64_t block = full_shapes_.at(name)[s.dim] / s.blocks;
  const auto [begin, length] = range(block, rank_);
  std::vector<Box> out;
  for (int64_t b = 0; b < s.blocks; ++b) {
    std::vector<int64_t> offsets(static_cast<size_t>(local.dim()), 0);
    offsets[static_cast<size_t>(s.dim)] = b * block + begin;
    out.push_back({offsets, views::narrow(local, s.dim, b * length, length)});
  }
  return out;
}

std::vector<std::pair<std::vector<int64_t>, Shape>> TensorParallelPlan::box_shapes(const std::string& name, int r) const {
  const Shape& full = full_shapes_.at(name);
  const auto it = splits_.find(name);
  if (it == splits_.end()) return {{std::vector<int64_t>(static_cast<size_t>(full.size()), 0), full}};
  const TensorSplit& s = it->second;
  const int64_t block = full[s.dim] / s.blocks;
  const auto [begin, length] = range(block, r);
  std::vector<std::pair<std::vector<int64_t>, Shape>> out;
  for (int64_t b = 0; b < s.blocks; ++b) {
    std::vector<int64_t> offsets(static_cast<size_t>(full.size()), 0), shape = full.vec();
    offsets[static_cast<size_t>(s.dim)] = b * block + begin;
    shape[static_cast<size_t>(s.dim)] = length;
    out.emplace_back(offsets, Shape(shape));
  }
  return out;
}

double clip_grad_norm_model_parallel(const std::vector<nn::NamedTensor>& params, const TensorParallelPlan* plan,
                                     comm::Communicator* tp, comm::Communicator* pp, double max_norm) {
  profiler::ProfileScope scope("clip_grad_norm", profiler::Phase::kOptimizer);
  std::vector<Tensor> split, replicated;
  for (const auto& [name, p] : params)
    if (p.grad().has_value()) (plan && plan->is_split(name) ? split : replicated).push_back(*p.grad());
  Tensor split_sq = full({1}, ops::sum_of_squares(split), DType::kF64);
  if (tp != nullptr) {
    profiler::ProfileScope comm_scope("tp.all_reduce", profiler::Phase::kCommunication);
    tp->all_reduce(split_sq);
  }
  Tensor sq = full({1}, split_sq.item() + ops::sum_of_squares(replicated), DType::kF64);
  if (pp != nullptr) {
    profiler::ProfileScope comm_scope("pp.all_reduce", profiler::Phase::kCommunication);
    pp->all_reduce(sq);
  }
  const double norm = std::sqrt(sq.item());
  if (max_norm > 0.0) {
    const double coef = max_norm / (norm + 1e-6);  // as torch.nn.utils.clip_grad_norm_
    if (coef < 1.0) {
      for (const Tensor& g : split) ops::scale_(g, coef);
      for (const Tensor& g : replicated) ops::scale_(g, coef);
    }
  }
  return norm;
}

std::unique_ptr<TensorParallelPlan> TensorParallelPlan::apply(models::CausalLM& model, comm::Communicator& tp,
                                                              bool sequence_parallel) {
  const models::ModelConfig& cfg = model.model_config();
  const int n = tp.size();
  model.check_tensor_parallel(n);
  auto plan = std::unique_ptr<TensorParallelPlan>(new TensorParallelPlan());
  plan->size_ = n;
  plan->rank_ = tp.rank();
  for (const auto& [name, p] : model.named_parameters()) plan->full_shapes_.emplace(name, p.shape());
  if (n == 1) return plan;
  const nn::ParallelPlan entries = model.parallel_plan();
  TRI_CHECK_NOT_IMPLEMENTED(!entries.empty(), "tensor parallelism: model.arch = \"", cfg.arch,
                            "\" states no tensor-parallel plan (CausalLM::parallel_plan)");

  const bool sp = sequence_parallel;
  const auto column = std::make_shared<ColumnParallel>(tp, sp);
  const auto row = std::make_shared<RowParallel>(tp, sp);
  const auto norm = std::make_shared<SequenceSplitLayerNorm>(tp);
  auto split = [&](const std::string& layer, const char* param, TensorSplit s) {
    const std::string name = layer + "." + param;
    if (plan->full_shapes_.contains(name)) plan->splits_.emplace(name, s);  // a layer without a bias has none
  };
  const std::vector<std::pair<std::string, nn::Module*>> layers = model.named_modules();
  for (const nn::ParallelPlanEntry& entry : entries) {
    const char* style = nn::parallel_style_name(entry.style);
    int matched = 0;
    for (const auto& [path, module] : layers) {
      if (!nn::plan_pattern_matches(entry.pattern, path)) continue;
      ++matched;
      auto* conv = dynamic_cast<nn::Conv1D*>(module);
      auto* layer_norm = dynamic_cast<nn::LayerNorm*>(module);
      auto* embedding = dynamic_cast<nn::Embedding*>(module);
      const bool fits = entry.style == nn::ParallelStyle::kColumnwise || entry.style == nn::ParallelStyle::kRowwise
                            ? conv != nullptr
                        : entry.style == nn::ParallelStyle::kVocabParallelEmbedding ? embedding != nullptr
                                                                                    : layer_norm || embedding;
      TRI_CHECK(fits, "tensor parallelism: the plan's entry '", entry.pattern, "' (", style, ") names layer '", path,
                "', which is not a layer that style splits");
      switch (entry.style) {
        case nn::ParallelStyle::kColumnwise:
          split(path, "weight", {1, entry.fused});
          split(path, "bias", {0, entry.fused});
          conv->set_style(column);
          break;
        case nn::ParallelStyle::kRowwise:
          split(path, "weight", {0, 1});
          conv->set_style(row);
          break;
        case nn::ParallelStyle::kVocabParallelEmbedding: {
          TRI_CHECK(cfg.vocab_size >= n, "tensor parallelism: model.vocab_size (", cfg.vocab_size,
                    ") must be at least parallel.tp (", n, "): each rank holds part of the vocabulary");
          split(path, "weight", {0, 1});
          const int64_t V = embedding->weight().size(0);
          std::vector<int64_t> widths;
          for (int r = 0; r < n; ++r) widths.push_back(plan->range(V, r).second);
          embedding->set_style(std::make_shared<VocabParallel>(tp, sp, plan->range(V, tp.rank()).first, widths));
          break;
        }
        case nn::ParallelStyle::kSequenceParallel:
          if (!sp) break;
          if (layer_norm) layer_norm->set_style(norm);
          else embedding->set_style(std::make_shared<SequenceSplitEmbedding>(tp));
          break;
      }
    }
    TRI_CHECK(matched > 0, "tensor parallelism: the plan's entry '", entry.pattern, "' (", style,
              ") matches no layer of the model");
  }

  // Every rank built the same full model (same seed or weights); keep this rank's shards.
  autograd::NoGradGuard no_grad;
  for (auto& [name, p] : model.named_parameters())
    if (plan->is_split(name)) p.set_data(plan->local_from_full(name, p));
  return plan;
}

}  // namespace trident::parallel
