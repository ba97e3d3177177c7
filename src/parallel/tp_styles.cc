#include "parallel/tp_styles.h"

#include "autograd/functions.h"
#include "autograd/record.h"
#include "core/copy.h"
#include "core/views.h"
#include "ops/vocab_parallel.h"
#include "parallel/tp_collectives.h"

namespace trident::parallel {
namespace {

// With sequence parallelism (`sp`), activations outside the column/row pairs are split along
// the sequence: entering a column-parallel layer gathers them (gather_sequence), leaving a
// row-parallel one reduce-scatters (reduce_scatter_sequence), and a replicated parameter used
// on this rank's part of the sequence enters through copy_to_tp, so that its gradient sums
// the ranks' parts.

class Conv1DColumnwise final : public nn::Conv1DStyle {
 public:
  explicit Conv1DColumnwise(std::shared_ptr<const TpEntry> entry) : entry_(std::move(entry)) {}
  Tensor forward(const Tensor& x, const Tensor& weight, const Tensor& bias, nn::Activation act) const override {
    const Tensor in = entry_->enter(x);
    // Each rank's output columns are whole features: the activation applies to them locally.
    const Tensor w = trident::transpose(weight, 0, 1);
    return act == nn::Activation::kGeluTanh ? trident::linear_gelu_tanh(in, w, bias) : trident::linear(in, w, bias);
  }

 private:
  std::shared_ptr<const TpEntry> entry_;
};

class Conv1DRowwise final : public nn::Conv1DStyle {
 public:
  Conv1DRowwise(comm::Communicator& tp, bool sp) : tp_(tp), sp_(sp) {}
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

// The vocabulary split by rows: [begin, begin + widths[rank]) here.
struct VocabSplit {
  comm::Communicator& tp;
  bool sp;
  int64_t begin;
  std::vector<int64_t> widths;
  // The head's input, whole on every rank.
  Tensor enter(const Tensor& h) const { return sp ? gather_sequence(h, tp) : copy_to_tp(h, tp); }
  Tensor logits(const Tensor& h, const Tensor& weight) const {
    return gather_from_tp(trident::linear(enter(h), weight), tp, widths);
  }
  Tensor loss(const Tensor& h, const Tensor& weight, const Tensor& targets) const {
    const Tensor full = enter(h);
    const Tensor h2 = trident::reshape(full, {-1, full.size(-1)});
    return vocab_parallel_cross_entropy(trident::linear(h2, weight), targets, begin, tp);
  }
};

class VocabParallelEmbedding final : public nn::EmbeddingStyle {
 public:
  explicit VocabParallelEmbedding(VocabSplit split) : split_(std::move(split)) {}

  Tensor lookup(const Tensor& ids, const Tensor& weight) const override {
    // Ids of other ranks' rows look up row 0 and are masked to zeros; the ranks' results sum
    // to the full lookup. The local ids are formed where the weight is (no host round trip).
    const ops::LocalIds local =
        ops::vocab_parallel_local_ids(core::to_device(ids, weight.device()), split_.begin, weight.size(0));
    const Tensor rows_here = trident::embedding(weight, local.local) * core::cast(local.mask, weight.dtype());
    return split_.sp ? reduce_scatter_sequence(rows_here, split_.tp) : reduce_from_tp(rows_here, split_.tp);
  }
  Tensor logits(const Tensor& h, const Tensor& weight) const override { return split_.logits(h, weight); }
  Tensor loss(const Tensor& h, const Tensor& weight, const Tensor& targets) const override {
    return split_.loss(h, weight, targets);
  }

 private:
  VocabSplit split_;
};

class VocabParallelHead final : public nn::LinearStyle {
 public:
  explicit VocabParallelHead(VocabSplit split) : split_(std::move(split)) {}
  Tensor forward(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias) const override {
    TRI_CHECK(!bias.has_value(), "tensor parallelism: a vocabulary-parallel head has no bias");
    return split_.logits(x, weight);
  }
  Tensor loss(const Tensor& x, const Tensor& weight, const Tensor& targets) const override {
    return split_.loss(x, weight, targets);
  }

 private:
  VocabSplit split_;
};

// Linear (weight (out, in)), Megatron's column- and row-parallel layers.
class LinearColumnwise final : public nn::LinearStyle {
 public:
  explicit LinearColumnwise(std::shared_ptr<const TpEntry> entry) : entry_(std::move(entry)) {}
  Tensor forward(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias) const override {
    return trident::linear(entry_->enter(x), weight, bias);
  }
  Tensor loss(const Tensor&, const Tensor&, const Tensor&) const override {
    TRI_CHECK(false, "tensor parallelism: a column-parallel layer is not an LM head (use the vocab-parallel head)");
  }

 private:
  std::shared_ptr<const TpEntry> entry_;
};

class LinearRowwise final : public nn::LinearStyle {
 public:
  LinearRowwise(comm::Communicator& tp, bool sp) : tp_(tp), sp_(sp) {}
  Tensor forward(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias) const override {
    // The bias once, after the sum of the ranks' partial products.
    const Tensor partial = trident::linear(x, weight);
    const Tensor y = sp_ ? reduce_scatter_sequence(partial, tp_) : reduce_from_tp(partial, tp_);
    if (!bias) return y;
    return y + (sp_ ? copy_to_tp(*bias, tp_) : *bias);
  }
  Tensor loss(const Tensor&, const Tensor&, const Tensor&) const override {
    TRI_CHECK(false, "tensor parallelism: a row-parallel layer is not an LM head");
  }

 private:
  comm::Communicator& tp_;
  bool sp_;
};

class LinearColumnwiseReplicated final : public nn::LinearStyle {
 public:
  LinearColumnwiseReplicated(std::shared_ptr<const TpEntry> entry, int64_t begin, int64_t width)
      : entry_(std::move(entry)), begin_(begin), width_(width) {}
  Tensor forward(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias) const override {
    // This rank's rows of the whole weight; copy_to_tp sums their gradient (and the entry the
    // input's) over the ranks, each of which used its own heads.
    const Tensor in = entry_->enter(x);
    comm::Communicator& tp = entry_->tp();
    const Tensor w = trident::contiguous(trident::narrow(copy_to_tp(weight, tp), 0, begin_, width_));
    std::optional<Tensor> b;
    if (bias) b = trident::contiguous(trident::narrow(copy_to_tp(*bias, tp), 0, begin_, width_));
    return trident::linear(in, w, b);
  }
  Tensor loss(const Tensor&, const Tensor&, const Tensor&) const override {
    TRI_CHECK(false, "tensor parallelism: a replicated attention projection is not an LM head");
  }

 private:
  std::shared_ptr<const TpEntry> entry_;
  int64_t begin_, width_;
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

class SequenceSplitRMSNorm final : public nn::RMSNormStyle {
 public:
  explicit SequenceSplitRMSNorm(comm::Communicator& tp) : tp_(tp) {}
  Tensor forward(const Tensor& x, const Tensor& weight, double eps) const override {
    return trident::rmsnorm(x, copy_to_tp(weight, tp_), eps);
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

Tensor TpEntry::enter(const Tensor& x) const {
  const bool record = autograd::needs_grad({x});
  if (last_in_.lock() == x.impl_ptr() && last_version_ == x.version() && last_recorded_ == record)
    if (std::shared_ptr<TensorImpl> out = last_out_.lock()) return Tensor(std::move(out));
  Tensor out = sp_ ? gather_sequence(x, tp_) : copy_to_tp(x, tp_);
  last_in_ = x.impl_ptr();
  last_out_ = out.impl_ptr();
  last_version_ = x.version();
  last_recorded_ = record;
  return out;
}

std::shared_ptr<const nn::Conv1DStyle> conv1d_columnwise(std::shared_ptr<const TpEntry> entry) {
  return std::make_shared<Conv1DColumnwise>(std::move(entry));
}
std::shared_ptr<const nn::Conv1DStyle> conv1d_rowwise(comm::Communicator& tp, bool sp) {
  return std::make_shared<Conv1DRowwise>(tp, sp);
}
std::shared_ptr<const nn::LinearStyle> linear_columnwise(std::shared_ptr<const TpEntry> entry) {
  return std::make_shared<LinearColumnwise>(std::move(entry));
}
std::shared_ptr<const nn::LinearStyle> linear_rowwise(comm::Communicator& tp, bool sp) {
  return std::make_shared<LinearRowwise>(tp, sp);
}
std::shared_ptr<const nn::LinearStyle> linear_columnwise_replicated(std::shared_ptr<const TpEntry> entry,
                                                                    int64_t begin, int64_t width) {
  return std::make_shared<LinearColumnwiseReplicated>(std::move(entry), begin, width);
}
std::shared_ptr<const nn::EmbeddingStyle> vocab_parallel_embedding(comm::Communicator& tp, bool sp, int64_t begin,
                                                                   std::vector<int64_t> widths) {
  return std::make_shared<VocabParallelEmbedding>(VocabSplit{tp, sp, begin, std::move(widths)});
}
std::shared_ptr<const nn::LinearStyle> vocab_parallel_head(comm::Communicator& tp, bool sp, int64_t begin,
                                                           std::vector<int64_t> widths) {
  return std::make_shared<VocabParallelHead>(VocabSplit{tp, sp, begin, std::move(widths)});
}
std::shared_ptr<const nn::EmbeddingStyle> sequence_split_positions(comm::Communicator& tp) {
  return std::make_shared<SequenceSplitEmbedding>(tp);
}
std::shared_ptr<const nn::LayerNormStyle> sequence_split_layernorm(comm::Communicator& tp) {
  return std::make_shared<SequenceSplitLayerNorm>(tp);
}
std::shared_ptr<const nn::RMSNormStyle> sequence_split_rmsnorm(comm::Communicator& tp) {
  return std::make_shared<SequenceSplitRMSNorm>(tp);
}

}  // namespace trident::parallel
