#include "parallel/tensor_parallel.h"

#include <algorithm>
#include <cmath>

#include "autograd/functions.h"
#include "core/allocator.h"
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
#include "parallel/tp_styles.h"

namespace trident::parallel {

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
  const nn::ParallelPlan entries = model.parallel_plan(n);
  TRI_CHECK_NOT_IMPLEMENTED(!entries.empty(), "tensor parallelism: model.arch = \"", cfg.arch,
                            "\" states no tensor-parallel plan (CausalLM::parallel_plan)");

  const bool sp = sequence_parallel;
  auto split = [&](const std::string& layer, const char* param, TensorSplit s) {
    const std::string name = layer + "." + param;
    if (plan->full_shapes_.contains(name)) plan->splits_.emplace(name, s);  // a layer without a bias has none
  };
  // This rank's rows [begin, begin + width) of each of a vocabulary's V rows, and every rank's width.
  auto vocab = [&](int64_t V) {
    TRI_CHECK(V >= n, "tensor parallelism: model.vocab_size (", V, ") must be at least parallel.tp (", n,
              "): each rank holds part of the vocabulary");
    std::vector<int64_t> widths;
    for (int r = 0; r < n; ++r) widths.push_back(plan->range(V, r).second);
    return std::make_pair(plan->range(V, tp.rank()).first, widths);
  };
  const std::vector<std::pair<std::string, nn::Module*>> layers = model.named_modules();
  const auto tp_entry = std::make_shared<const TpEntry>(tp, sp);  // Note [One entry per input]
  for (const nn::ParallelPlanEntry& entry : entries) {
    const char* style = nn::parallel_style_name(entry.style);
    int matched = 0;
    for (const auto& [path, module] : layers) {
      if (!nn::plan_pattern_matches(entry.pattern, path)) continue;
      ++matched;
      auto* conv = dynamic_cast<nn::Conv1D*>(module);
      auto* linear = dynamic_cast<nn::Linear*>(module);
      auto* layer_norm = dynamic_cast<nn::LayerNorm*>(module);
      auto* rms_norm = dynamic_cast<nn::RMSNorm*>(module);
      auto* embedding = dynamic_cast<nn::Embedding*>(module);
      bool fits = false;
      switch (entry.style) {
        case nn::ParallelStyle::kColumnwise:
        case nn::ParallelStyle::kRowwise: fits = conv || linear; break;
        case nn::ParallelStyle::kColumnwiseReplicated:
        case nn::ParallelStyle::kVocabParallelHead: fits = linear != nullptr; break;
        case nn::ParallelStyle::kVocabParallelEmbedding: fits = embedding != nullptr; break;
        case nn::ParallelStyle::kSequenceParallel: fits = layer_norm || rms_norm || embedding; break;
      }
      TRI_CHECK(fits, "tensor parallelism: the plan's entry '", entry.pattern, "' (", style, ") names layer '", path,
                "', which is not a layer that style splits");
      switch (entry.style) {
        case nn::ParallelStyle::kColumnwise:
          if (conv) {  // (in, out): the output features are dim 1
            split(path, "weight", {1, entry.fused});
            conv->set_style(conv1d_columnwise(tp_entry));
          } else {  // (out, in)
            split(path, "weight", {0, entry.fused});
            linear->set_style(linear_columnwise(tp_entry));
          }
          split(path, "bias", {0, entry.fused});
          break;
        case nn::ParallelStyle::kRowwise:
          if (conv) {
            split(path, "weight", {0, 1});
            conv->set_style(conv1d_rowwise(tp, sp));
          } else {
            split(path, "weight", {1, 1});
            linear->set_style(linear_rowwise(tp, sp));
          }
          break;
        case nn::ParallelStyle::kColumnwiseReplicated: {
          TRI_CHECK(entry.heads >= 1 && n % entry.heads == 0 && linear->weight().size(0) % entry.heads == 0,
                    "tensor parallelism: the plan's entry '", entry.pattern, "' replicates ", entry.heads,
                    " heads, which must divide parallel.tp (", n, ") and the layer's ", linear->weight().size(0),
                    " outputs");
          const int64_t width = linear->weight().size(0) / entry.heads, head = tp.rank() / (n / entry.heads);
          linear->set_style(linear_columnwise_replicated(tp_entry, head * width, width));
          break;
        }
        case nn::ParallelStyle::kVocabParallelHead: {
          split(path, "weight", {0, 1});
          auto [begin, widths] = vocab(linear->weight().size(0));
          linear->set_style(vocab_parallel_head(tp, sp, begin, std::move(widths)));
          break;
        }
        case nn::ParallelStyle::kVocabParallelEmbedding: {
          split(path, "weight", {0, 1});
          auto [begin, widths] = vocab(embedding->weight().size(0));
          embedding->set_style(vocab_parallel_embedding(tp, sp, begin, std::move(widths)));
          break;
        }
        case nn::ParallelStyle::kSequenceParallel:
          if (!sp) break;
          if (layer_norm) layer_norm->set_style(sequence_split_layernorm(tp));
          else if (rms_norm) rms_norm->set_style(sequence_split_rmsnorm(tp));
          else embedding->set_style(sequence_split_positions(tp));
          break;
      }
    }
    TRI_CHECK(matched > 0, "tensor parallelism: the plan's entry '", entry.pattern, "' (", style,
              ") matches no layer of the model");
  }

  // Every rank built the same full model (same seed or weights); keep this rank's shards.
  // The shards are parameters (the allocator's category; the planner's memory model counts them so).
  autograd::NoGradGuard no_grad;
  MemoryCategoryGuard params(MemoryCategory::kParameter);
  for (auto& [name, p] : model.named_parameters())
    if (plan->is_split(name)) p.set_data(plan->local_from_full(name, p));
  return plan;
}

}  // namespace trident::parallel
