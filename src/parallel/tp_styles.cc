// The tensor-parallel styles of nn's layers (tp_styles.h): their wrappers and their entries in
// the style registry. The differentiable collectives they use are tp_collectives.h's; which
// layers get which style is the model's plan.
#include "parallel/tp_styles.h"

#include "autograd/functions.h"
#include "autograd/record.h"
#include "core/copy.h"
#include "core/views.h"
#include "moe/sparse_moe.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/norm.h"
#include "ops/vocab_parallel.h"
#include "parallel/tp_collectives.h"
#include "parallel/placement.h"
#include "parallel/tp_style_registry.h"

namespace trident::parallel {
namespace {

// With sequence parallelism (`sp`), activations outside the column/row pairs are split along
// the sequence: entering a column-parallel layer gathers them (gather_sequence), leaving a
// row-parallel one reduce-scatters (reduce_scatter_sequence), and a replicated parameter used
// on this rank's part of the sequence enters through copy_to_tp, so that its gradient sums
// the ranks' parts.

// A wrapper of the parallelism kind, outermost on its layer (Note [Wrapper order]).
template <class W>
class TpWrapper : public W {
 public:
  explicit TpWrapper(const char* name) : name_(name) {}
  nn::WrapperKind kind() const override { return nn::WrapperKind::kParallelism; }
  std::string name() const override { return name_; }

 private:
  const char* name_;
};

// Conv1D and Linear, Megatron's column-parallel layer: this rank's output features. Each is a
// whole feature, so the bias and an activation apply to it here, in the layers below.
class Columnwise final : public TpWrapper<nn::LinearWrapper> {
 public:
  explicit Columnwise(std::shared_ptr<const TpEntry> entry)
      : TpWrapper(nn::tp_style::kColumnwise), entry_(std::move(entry)) {}
  Tensor forward(const Tensor& x, const nn::LayerParams& p, const nn::LinearCall& call,
                 const nn::LinearInner& inner) const override {
    return inner.forward(entry_->enter(x), p, call);
  }
  Tensor loss(const Tensor&, const nn::LayerParams&, const Tensor&, const nn::LinearInner&) const override {
    TRI_CHECK(false,
              "tensor parallelism: a column-parallel layer is not an LM head (an LM head takes the vocab_parallel style)");
  }

 private:
  std::shared_ptr<const TpEntry> entry_;
};

// Note [The bias of a row-parallel layer]
// The ranks' partial products are summed (all-reduce, or reduce-scatter along the sequence),
// then the replicated bias added once, then the activation. The layers below are asked for
// the product alone (LinearCall{bias: false, act: none}), so an adapter among them adds its
// partial product to the base's before the sum. Under sequence parallelism the bias enters
// through copy_to_tp before the partial sums leave: the order in which GCC evaluated the former
// `reduce_scatter_sequence(partial) + copy_to_tp(bias)` (operands right to left), kept so that
// the autograd graph, and so the backward's order of collectives, is what it was.
class Rowwise final : public TpWrapper<nn::LinearWrapper> {
 public:
  Rowwise(comm::Communicator& tp, bool sp) : TpWrapper(nn::tp_style::kRowwise), tp_(tp), sp_(sp) {}
  Tensor forward(const Tensor& x, const nn::LayerParams& p, const nn::LinearCall& call,
                 const nn::LinearInner& inner) const override {
    const Tensor partial = inner.forward(x, p, {.bias = false, .act = nn::Activation::kNone});
    const Tensor y = sum(partial, call.bias ? p.bias : nn::kNoBias);
    return call.act == nn::Activation::kGeluTanh ? trident::gelu_tanh(y) : y;
  }
  Tensor loss(const Tensor&, const nn::LayerParams&, const Tensor&, const nn::LinearInner&) const override {
    TRI_CHECK(false, "tensor parallelism: a row-parallel layer is not an LM head");
  }

 private:
  Tensor sum(const Tensor& partial, const std::optional<Tensor>& bias) const {
    if (!bias) return sp_ ? reduce_scatter_sequence(partial, tp_) : reduce_from_tp(partial, tp_);
    if (!sp_) return reduce_from_tp(partial, tp_) + *bias;
    const Tensor b = copy_to_tp(*bias, tp_);  // See Note [The bias of a row-parallel layer]
    return reduce_scatter_sequence(partial, tp_) + b;
  }

  comm::Communicator& tp_;
  bool sp_;
};

// A Linear kept whole on every rank, of which this rank uses output features [begin, begin +
// width) (grouped-query attention's k and v when there are fewer kv heads than ranks).
class ColumnwiseReplicated final : public TpWrapper<nn::LinearWrapper> {
 public:
  ColumnwiseReplicated(std::shared_ptr<const TpEntry> entry, int64_t begin, int64_t width)
      : TpWrapper(nn::tp_style::kColumnwiseReplicated), entry_(std::move(entry)), begin_(begin), width_(width) {}
  Tensor forward(const Tensor& x, const nn::LayerParams& p, const nn::LinearCall& call,
                 const nn::LinearInner& inner) const override {
    // This rank's rows of the whole weight; copy_to_tp sums their gradient (and the entry the
    // input's) over the ranks, each of which used its own heads.
    const Tensor in = entry_->enter(x);
    comm::Communicator& tp = entry_->tp();
    const Tensor w = trident::contiguous(trident::narrow(copy_to_tp(p.weight, tp), 0, begin_, width_));
    std::optional<Tensor> b;
    if (p.bias) b = trident::contiguous(trident::narrow(copy_to_tp(*p.bias, tp), 0, begin_, width_));
    return inner.forward(in, {w, b}, call);
  }
  Tensor loss(const Tensor&, const nn::LayerParams&, const Tensor&, const nn::LinearInner&) const override {
    TRI_CHECK(false, "tensor parallelism: a replicated attention projection is not an LM head");
  }

 private:
  std::shared_ptr<const TpEntry> entry_;
  int64_t begin_, width_;
};

// The vocabulary split by rows: [begin, begin + widths[rank]) here. `local` computes this
// rank's logit columns of a whole input (the layers below the wrapper).
struct VocabSplit {
  comm::Communicator& tp;
  bool sp;
  int64_t begin;
  std::vector<int64_t> widths;
  // The head's input, whole on every rank.
  Tensor enter(const Tensor& h) const { return sp ? gather_sequence(h, tp) : copy_to_tp(h, tp); }
  template <class Local>
  Tensor logits(const Tensor& h, const Local& local) const {
    return gather_from_tp(local(enter(h)), tp, widths);
  }
  template <class Local>
  Tensor loss(const Tensor& h, const Tensor& targets, const Local& local) const {
    const Tensor full = enter(h);
    const Tensor h2 = trident::reshape(full, {-1, full.size(-1)});
    return vocab_parallel_cross_entropy(local(h2), targets, begin, tp);
  }
};

class VocabParallelEmbedding final : public TpWrapper<nn::EmbeddingWrapper> {
 public:
  explicit VocabParallelEmbedding(VocabSplit split)
      : TpWrapper(nn::tp_style::kVocabParallel), split_(std::move(split)) {}
  Tensor lookup(const Tensor& ids, const nn::LayerParams& p, const nn::EmbeddingInner& inner) const override {
    // Ids of other ranks' rows look up row 0 and are masked to zeros; the ranks' results sum
    // to the full lookup. The local ids are formed where the weight is (no host round trip).
    const ops::LocalIds local =
        ops::vocab_parallel_local_ids(core::to_device(ids, p.weight.device()), split_.begin, p.weight.size(0));
    const Tensor rows_here = inner.lookup(local.local, p) * core::cast(local.mask, p.weight.dtype());
    return split_.sp ? reduce_scatter_sequence(rows_here, split_.tp) : reduce_from_tp(rows_here, split_.tp);
  }
  Tensor logits(const Tensor& h, const nn::LayerParams& p, const nn::EmbeddingInner& inner) const override {
    return split_.logits(h, [&](const Tensor& x) { return inner.logits(x, p); });
  }
  Tensor loss(const Tensor& h, const nn::LayerParams& p, const Tensor& targets,
              const nn::EmbeddingInner& inner) const override {
    return split_.loss(h, targets, [&](const Tensor& x) { return inner.logits(x, p); });
  }

 private:
  VocabSplit split_;
};

class VocabParallelHead final : public TpWrapper<nn::LinearWrapper> {
 public:
  explicit VocabParallelHead(VocabSplit split)
      : TpWrapper(nn::tp_style::kVocabParallel), split_(std::move(split)) {}
  Tensor forward(const Tensor& x, const nn::LayerParams& p, const nn::LinearCall& call,
                 const nn::LinearInner& inner) const override {
    TRI_CHECK(!p.bias.has_value(), "tensor parallelism: a vocabulary-parallel head has no bias");
    return split_.logits(x, [&](const Tensor& h) { return inner.forward(h, p, call); });
  }
  Tensor loss(const Tensor& x, const nn::LayerParams& p, const Tensor& targets,
              const nn::LinearInner& inner) const override {
    return split_.loss(x, targets, [&](const Tensor& h) { return inner.forward(h, p); });
  }

 private:
  VocabSplit split_;
};

// Sequence parallelism's position embedding: this rank's part of the positions.
class SequenceSplitPositions final : public TpWrapper<nn::EmbeddingWrapper> {
 public:
  explicit SequenceSplitPositions(comm::Communicator& tp)
      : TpWrapper(nn::tp_style::kSequenceParallel), tp_(tp) {}
  Tensor lookup(const Tensor& ids, const nn::LayerParams& p, const nn::EmbeddingInner& inner) const override {
    const int64_t T = ids.size(-1), n = tp_.size();
    TRI_CHECK(T % n == 0, "sequence parallelism: the sequence length ", T, " must be divisible by parallel.tp (", n, ")");
    const Tensor w = copy_to_tp(p.weight, tp_);
    return inner.lookup(views::narrow(ids, ids.dim() - 1, tp_.rank() * (T / n), T / n), {w});
  }
  Tensor logits(const Tensor&, const nn::LayerParams&, const nn::EmbeddingInner&) const override {
    TRI_CHECK(false, "sequence parallelism: the position embedding is not an output head");
  }

 private:
  comm::Communicator& tp_;
};

// Sequence parallelism's LayerNorm and RMSNorm: replicated weights used on this rank's part of
// the sequence. The bias enters first: the order GCC evaluated the former call's arguments in
// (right to left; see Note [The bias of a row-parallel layer]).
class SequenceSplitNorm final : public TpWrapper<nn::NormWrapper> {
 public:
  explicit SequenceSplitNorm(comm::Communicator& tp) : TpWrapper(nn::tp_style::kSequenceParallel), tp_(tp) {}
  Tensor forward(const Tensor& x, const nn::LayerParams& p, const nn::NormInner& inner) const override {
    std::optional<Tensor> b;
    if (p.bias) b = copy_to_tp(*p.bias, tp_);
    const Tensor w = copy_to_tp(p.weight, tp_);
    return inner.forward(x, {w, b});
  }

 private:
  comm::Communicator& tp_;
};

// Sequence parallelism's mixture-of-experts layer: it gathers the whole sequence, runs whole on
// every tensor-parallel rank (its router and experts are replicated over tp) and keeps this
// rank's part of the output. The gradients each rank computes are then the whole ones, so the
// pair's backward takes a block and gathers instead of summing (tp_collectives.h).
class SequenceWholeMoe final : public moe::TokenScope {
 public:
  explicit SequenceWholeMoe(comm::Communicator& tp) : tp_(tp) {}
  Tensor enter(const Tensor& x) const override { return gather_whole_sequence(x, tp_); }
  Tensor leave(const Tensor& y) const override { return split_sequence(y, tp_); }

 private:
  comm::Communicator& tp_;
};

// This rank's rows of a vocabulary of V rows, and every rank's width.
VocabSplit vocab_split(const TpStyleTarget& t, int64_t V) {
  const int n = t.tp.size();
  TRI_CHECK(V >= n, "tensor parallelism: model.vocab_size (", V, ") must be at least parallel.tp (", n,
            "): each rank holds part of the vocabulary");
  std::vector<int64_t> widths;
  for (int r = 0; r < n; ++r) widths.push_back(shard_range(V, n, r).second);
  return {t.tp, t.sequence_parallel, shard_range(V, n, t.tp.rank()).first, std::move(widths)};
}

// Conv1D's weight is (in, out), Linear's (out, in): the features a style splits are dim `out`
// or `in` of the one and the other.
template <class Layer>
void register_linear_family(TpStyleRegistry& r, int64_t out, int64_t in) {
  // A factor is an nn::Linear (out, in) whatever the layer's layout.
  add_tp_style<Layer>(
      r, nn::tp_style::kColumnwise, {{"weight", out, true}, {"bias", 0, true}},
      [](Layer& l, const TpStyleTarget& t) { l.add_wrapper(std::make_shared<Columnwise>(t.input)); },
      [](nn::FactorSide side) -> std::optional<TpParamSplit> {
        if (side == nn::FactorSide::kOutput) return TpParamSplit{"weight", 0, true};
        return std::nullopt;
      });
  add_tp_style<Layer>(
      r, nn::tp_style::kRowwise, {{"weight", in}},
      [](Layer& l, const TpStyleTarget& t) { l.add_wrapper(std::make_shared<Rowwise>(t.tp, t.sequence_parallel)); },
      [](nn::FactorSide side) -> std::optional<TpParamSplit> {
        if (side == nn::FactorSide::kInput) return TpParamSplit{"weight", 1, false};
        return std::nullopt;
      });
}

// replicate_factor's wrapper: the whole weight through copy_to_tp.
class ReplicatedFactor final : public TpWrapper<nn::LinearWrapper> {
 public:
  explicit ReplicatedFactor(comm::Communicator& tp) : TpWrapper("replicated_factor"), tp_(tp) {}
  Tensor forward(const Tensor& x, const nn::LayerParams& p, const nn::LinearCall& call,
                 const nn::LinearInner& inner) const override {
    const Tensor w = copy_to_tp(p.weight, tp_);
    std::optional<Tensor> b;
    if (p.bias) b = copy_to_tp(*p.bias, tp_);
    return inner.forward(x, {w, b}, call);
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

void replicate_factor(nn::Module& factor, comm::Communicator& tp) {
  auto* linear = dynamic_cast<nn::LinearLayer*>(&factor);
  TRI_CHECK(linear != nullptr, "tensor parallelism: an adapter's factor is not a linear layer (", layer_type_name(typeid(factor)),
            ")");
  linear->add_wrapper(std::make_shared<ReplicatedFactor>(tp));
}

void register_tp_styles(TpStyleRegistry& r) {
  using nn::tp_style::kColumnwiseReplicated, nn::tp_style::kSequenceParallel, nn::tp_style::kVocabParallel;
  register_linear_family<nn::Conv1D>(r, 1, 0);
  register_linear_family<nn::Linear>(r, 0, 1);
  add_tp_style<nn::Linear>(r, kColumnwiseReplicated, {}, [](nn::Linear& l, const TpStyleTarget& t) {
    const int64_t n = t.tp.size(), heads = t.entry.heads, outputs = l.weight().size(0);
    TRI_CHECK(heads >= 1 && n % heads == 0 && outputs % heads == 0, "tensor parallelism: the plan's entry '",
              t.entry.pattern, "' replicates ", heads, " heads, which must divide parallel.tp (", n,
              ") and the layer's ", outputs, " outputs");
    const int64_t width = outputs / heads, head = t.tp.rank() / (n / heads);
    l.add_wrapper(std::make_shared<ColumnwiseReplicated>(t.input, head * width, width));
  });
  add_tp_style<nn::Linear>(r, kVocabParallel, {{"weight", 0}}, [](nn::Linear& l, const TpStyleTarget& t) {
    l.add_wrapper(std::make_shared<VocabParallelHead>(vocab_split(t, l.weight().size(0))));
  });
  add_tp_style<nn::Embedding>(r, kVocabParallel, {{"weight", 0}}, [](nn::Embedding& l, const TpStyleTarget& t) {
    l.add_wrapper(std::make_shared<VocabParallelEmbedding>(vocab_split(t, l.weight().size(0))));
  });
  add_tp_style<nn::Embedding>(r, kSequenceParallel, {}, [](nn::Embedding& l, const TpStyleTarget& t) {
    if (t.sequence_parallel) l.add_wrapper(std::make_shared<SequenceSplitPositions>(t.tp));
  });
  const auto sequence_norm = [](nn::NormLayer& l, const TpStyleTarget& t) {
    if (t.sequence_parallel) l.add_wrapper(std::make_shared<SequenceSplitNorm>(t.tp));
  };
  add_tp_style<nn::LayerNorm>(r, kSequenceParallel, {}, sequence_norm);
  add_tp_style<nn::RMSNorm>(r, kSequenceParallel, {}, sequence_norm);
  add_tp_style<moe::SparseMoe>(r, kSequenceParallel, {}, [](moe::SparseMoe& l, const TpStyleTarget& t) {
    if (t.sequence_parallel) l.set_token_scope(std::make_shared<SequenceWholeMoe>(t.tp));
  });
}

}  // namespace trident::parallel
