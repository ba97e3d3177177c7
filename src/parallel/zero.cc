#include "parallel/zero.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "autograd/engine.h"
#include "core/allocator.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/profiler.h"
#include "core/views.h"
#include "ops/optim.h"
#include "parallel/zero/flat_gradients.h"
#include "parallel/zero/replicated_parameters.h"
#include "parallel/zero/sharded_adamw.h"
#include "parallel/zero/sharded_parameters.h"
#include "parallel/zero/staged_gradients.h"

namespace trident::parallel {
namespace {

using zero::flat_slice;
using zero::zeros_in;

// The arguments' checks, then the stage's layout: buckets by size (stages 1-2) or by part.
zero::ZeroLayout checked_layout(const std::vector<nn::NamedTensor>& params, const comm::Communicator& comm, int stage,
                                int64_t bucket_bytes, const std::vector<std::vector<size_t>>& parts, DType compute,
                                bool reducer) {
  TRI_CHECK(stage >= 1 && stage <= 3, "ZeroOptimizer: stage must be 1, 2 or 3, got ", stage);
  TRI_CHECK(!reducer || stage == 1, "ZeRO-", stage, ": compressed gradients compose with stage 1 only");
  TRI_CHECK(compute == DType::kF32 || compute == DType::kBF16 || compute == DType::kF16,
            "ZeroOptimizer: the compute dtype must be f32, bf16 or f16, got ", compute);
  TRI_CHECK(stage != 3 || !parts.empty(), "ZeRO-3 needs the model's parts (its parameter groups)");
  if (stage == 3) return zero::ZeroLayout::by_parts(params, comm.rank(), comm.size(), parts);
  const int64_t limit = std::max<int64_t>(1, bucket_bytes / static_cast<int64_t>(sizeof(float)));
  return zero::ZeroLayout::by_size(params, comm.rank(), comm.size(), limit);
}

}  // namespace

// Note [ZeRO's allocation order]
// Why does the constructor build the pieces in this order? The planner's memory tests compare
// the allocator's peaks, per category, with a prediction, to the byte in places. The pieces
// allocate in their constructors, so their order is the order of the allocations: the
// reducer's state per bucket; the masters (which take_values fills, so before the
// parameters); the parameters, each bucket taking its values through transient buffers
// (mixed precision's f32 values, ZeRO-3's gathered part); the gradients; then AdamW's m and v
// and ZeRO-Offload's host buffers. Moving the moments or the gradients before the parameters
// would add them to the peak of the transients.
ZeroOptimizer::ZeroOptimizer(const std::vector<nn::NamedTensor>& params, comm::Communicator& comm, int stage,
                             int64_t bucket_bytes, const optim::AdamWOptions& options,
                             const std::vector<std::vector<size_t>>& parts, DType compute, bool offload,
                             std::unique_ptr<GradReducer> reducer, const std::optional<zero::NvmeStateOptions>& nvme,
                             const std::optional<zero::NvmeParamOptions>& nvme_params)
    : comm_(comm),
      compute_(compute),
      offload_(offload),
      layout_(checked_layout(params, comm, stage, bucket_bytes, parts, compute, reducer != nullptr)),
      alive_(std::make_shared<bool>(true)) {
  // The policies are chosen here, and only here. See Note [ZeRO's allocation order].
  if (reducer) zero::FlatGradients::prepare(*reducer, layout_);
  TRI_CHECK(!nvme || offload_, "ZeRO: the NVMe tier holds offloaded optimizer state (offload must be on)");
  // The parameter tier's values are written only from the masters, apart under offload.
  TRI_CHECK(!nvme_params || (stage == 3 && offload_),
            "ZeRO: the parameter tier holds ZeRO-3's shard with offloaded masters (stage ", stage, ", offload ",
            offload_ ? "on" : "off", ")");
  state_ = nvme ? zero::nvme_state(layout_, has_masters(), *nvme)
                : zero::memory_state(layout_, offload_ ? Device::cpu() : layout_.device(), has_masters());
  const auto take = [this](const Bucket& b, const Tensor& into) { take_values(b, into); };
  if (stage == 3) params_ = std::make_unique<zero::ShardedParameters>(layout_, comm_, compute_, take, nvme_params);
  else params_ = std::make_unique<zero::ReplicatedParameters>(layout_, comm_, compute_, stage, take);
  // The model's own parameters are copies now, freed into the allocator's cache: give them back
  // before the gradients are allocated beside them, in other sizes (Note [ZeRO's allocation
  // order]: the peaks counted are the same; the memory the process holds is not).
  if (Allocator* allocator = device_allocator(layout_.device().type)) allocator->empty_cache();
  zero::GradientShards::Hooks hooks{
      [this](size_t u) { params_->gradients_done(u); },
      [this](size_t u) {
        if (adamw_->steps_on_host()) adamw_->to_host(layout_.buckets()[u], grads_->shard(u));  // to the host's AdamW at once
      }};
  if (stage == 1) grads_ = std::make_unique<zero::FlatGradients>(layout_, comm_, std::move(hooks), std::move(reducer));
  else grads_ = std::make_unique<zero::StagedGradients>(layout_, comm_, std::move(hooks));
  adamw_ = std::make_unique<zero::ShardedAdamW>(layout_, options, compute_, offload_, *state_, nvme_params.has_value());
  std::weak_ptr<bool> alive = alive_;
  for (size_t k = 0; k < layout_.num_params(); ++k)
    autograd::register_grad_ready_hook(layout_.param(k), [this, k, alive](const Tensor&) {
      if (alive.lock()) grads_->grad_ready(k);
    });
}

// The pieces' destructors wait for what is in flight: adamw_ its copies, grads_ its
// reductions, params_ its gathers, each before its buffers go.
ZeroOptimizer::~ZeroOptimizer() { alive_.reset(); }

void ZeroOptimizer::take_values(const Bucket& b, const Tensor& into) {
  const int64_t n = layout_.shard_len(b);
  std::optional<Tensor> values32;  // transient
  if (mixed()) values32 = zeros_in(MemoryCategory::kGatheredParameter, b.length, DType::kF32, layout_.device());
  const Tensor values = values32.value_or(into);
  for (size_t k : b.params) {
    Tensor p = layout_.param(k);
    const int64_t at = layout_.flat_offset(k) - b.begin;
    core::copy_(views::view(flat_slice(values, at, p.numel()), p.shape().span()), p);
    p.set_data(views::view(flat_slice(into, at, p.numel()), p.shape().span()));
  }
  {
    profiler::ProfileScope scope("zero.broadcast", profiler::Phase::kCommunication);
    comm_.broadcast(values, 0);
  }
  if (has_masters())  // this rank's part of the values, into the units its shard overlaps
    for (const zero::UnitSpan& span : zero::spans_of(state_->units(), layout_.shard_offset(b), n)) {
      const zero::UnitState s = state_->acquire(span.unit);
      core::copy_(flat_slice(*s.masters, span.in_unit, span.length),
                  flat_slice(values, comm_.rank() * n + span.in_range, span.length));
      state_->release(span.unit, true);
    }
  if (mixed()) core::copy_(into, values);  // rounded to the compute dtype
}

Tensor ZeroOptimizer::run(size_t part, const nn::PartForward& forward, const Tensor& x) {
  return params_->run(part, forward, x);
}

GradReducer* ZeroOptimizer::reducer() const { return grads_->reducer(); }

void ZeroOptimizer::begin_backward(bool last_micro_batch) { grads_->begin_backward(last_micro_batch); }

void ZeroOptimizer::end_backward() { grads_->end_backward(); }

bool ZeroOptimizer::holds(const std::string& name) const {
  const std::vector<std::string>& names = layout_.names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

void ZeroOptimizer::add_grad(const std::string& name, const Tensor& grad) {
  const std::vector<std::string>& names = layout_.names();
  const size_t k = static_cast<size_t>(std::find(names.begin(), names.end(), name) - names.begin());
  TRI_CHECK(k < names.size(), "ZeRO: no parameter named '", name, "'");
  TRI_CHECK(grad.shape() == layout_.param(k).shape(), "ZeRO: gradient ", grad.shape(), " for parameter '", name,
            "' of shape ", layout_.param(k).shape());
  grads_->add(k, grad);
}

std::array<double, 2> ZeroOptimizer::grad_squares(bool by_split) {
  profiler::ProfileScope scope("clip_grad_norm", profiler::Phase::kOptimizer);
  const std::vector<Bucket>& buckets = layout_.buckets();
  std::vector<Tensor> shards;
  for (size_t u = 0; u < buckets.size(); ++u) shards.push_back(grads_->shard(u));
  if (!by_split) {
    Tensor sq = full({1}, ops::sum_of_squares(shards), DType::kF64);
    profiler::ProfileScope comm_scope("zero.all_reduce", profiler::Phase::kCommunication);
    comm_.all_reduce(sq);
    return {0.0, sq.item()};
  }
  // Squares of split and of replicated parameters apart (the caller sums the first over tp).
  std::vector<Tensor> split, replicated;
  for (size_t u = 0; u < buckets.size(); ++u)
    for (const Segment& s : buckets[u].mine)
      (split_[s.param] ? split : replicated)
          .push_back(flat_slice(shards[u], s.flat - layout_.shard_begin(buckets[u]), s.length));
  Tensor sq = from_vector(std::vector<double>{ops::sum_of_squares(split), ops::sum_of_squares(replicated)}, Shape{2});
  profiler::ProfileScope comm_scope("zero.all_reduce", profiler::Phase::kCommunication);
  comm_.all_reduce(sq);
  const std::vector<double> v = to_vector<double>(sq);
  return {v[0], v[1]};
}

void ZeroOptimizer::scale_grads(double factor) {
  if (factor == 1.0) return;
  if (adamw_->steps_on_host()) {  // ZeRO-Offload: AdamW reads the host's copies
    adamw_->scale_host_grads(factor);
  } else {
    for (size_t u = 0; u < layout_.buckets().size(); ++u) ops::scale_(grads_->shard(u), factor);
  }
}

void ZeroOptimizer::step(double lr) {
  profiler::ProfileScope scope("zero.step", profiler::Phase::kOptimizer);
  ++step_;
  adamw_->step(lr, step_,
               {[this](const Bucket& b) { return params_->shard(b); },
                [this](const Bucket& b) { return grads_->shard(layout_.index_of(b)); },
                [this](const Bucket& b) { params_->shard_written(b); }});
  // Stages 1-2: everyone's updated shards, in place into the flat parameters. (Stage 3
  // gathers them when the next forward needs them.)
  profiler::ProfileScope gather_scope("zero.all_gather", profiler::Phase::kCommunication);
  params_->stepped();
  skip_step();
}

void ZeroOptimizer::skip_step() {
  adamw_->wait_copies();  // the next backward overwrites the shards they read
  grads_->end_step();
}

// Note [Streaming the tier into a checkpoint]
// With the state on NVMe, a checkpoint cannot copy it out first: the state is what does not fit
// in memory. So each piece of it comes with a loader instead of values, and the checkpoint
// writer calls it as it writes that tensor (train/trainer_checkpoint.cc): host memory holds one
// piece and the tier's staging buffers. A segment's parameter, m and v come in a row, and the
// segments in the units' order, so the staging buffers (which keep the units read last) serve
// m and v without reading the unit again; when weights and state go to separate files (one
// process) the tier is read twice, once per file.
std::vector<ZeroOptimizer::Piece> ZeroOptimizer::pieces() {
  std::vector<Piece> out;
  for (const Bucket& b : layout_.buckets()) {
    for (const Segment& s : b.mine) {
      const int64_t at = layout_.shard_offset(b) + (s.flat - layout_.shard_begin(b));  // in the concatenated shards
      const std::vector<zero::UnitSpan> spans = zero::spans_of(state_->units(), at, s.length);
      for (int k = 0; k < 3; ++k) {
        static constexpr const char* kSuffix[] = {"", ".exp_avg", ".exp_avg_sq"};
        Piece piece{layout_.name(s.param) + kSuffix[k], layout_.param(s.param).shape(), s.in_param,
                    s.in_param + s.length, {}, {}};
        if (k == 0 && !has_masters()) {  // the parameters are the masters
          piece.values = flat_slice(params_->shard(b), s.flat - layout_.shard_begin(b), s.length);
        } else if (state_->resident()) {  // a view of the live state: one unit per bucket
          TRI_ASSERT(spans.size() == 1, "ZeRO: a resident segment spans ", spans.size(), " units");
          const zero::UnitState state = state_->acquire(spans[0].unit);
          piece.values = flat_slice(k == 0 ? *state.masters : k == 1 ? *state.m : *state.v, spans[0].in_unit, s.length);
          state_->release(spans[0].unit, false);
        } else {  // read from the tier when written; a segment may span units
          piece.load = [this, spans, length = s.length, k] {
            Tensor values = zeros_in(MemoryCategory::kOptimizerState, length, DType::kF32, Device::cpu());
            for (const zero::UnitSpan& span : spans) {
              const zero::UnitState state = state_->acquire(span.unit);
              const Tensor& from = k == 0 ? *state.masters : k == 1 ? *state.m : *state.v;
              core::copy_(flat_slice(values, span.in_range, span.length), flat_slice(from, span.in_unit, span.length));
              state_->release(span.unit, false);
            }
            return values;
          };
        }
        out.push_back(std::move(piece));
      }
    }
  }
  return out;
}

void ZeroOptimizer::load(const RangeReader& read, bool with_state, int64_t step) {
  // Values of a segment's range from the checkpoint, into the units it spans.
  const auto into_units = [this](const Tensor& values, int64_t at, int kind) {
    for (const zero::UnitSpan& span : zero::spans_of(state_->units(), at, values.numel())) {
      const zero::UnitState state = state_->acquire(span.unit);
      const Tensor& to = kind == 0 ? *state.masters : kind == 1 ? *state.m : *state.v;
      core::copy_(flat_slice(to, span.in_unit, span.length), flat_slice(values, span.in_range, span.length));
      state_->release(span.unit, true);
    }
  };
  for (const Bucket& b : layout_.buckets()) {
    params_->load_bucket(b, read);
    for (const Segment& s : b.mine) {
      const int64_t at = layout_.shard_offset(b) + (s.flat - layout_.shard_begin(b));
      const std::string& name = layout_.name(s.param);
      std::optional<Tensor> masters;
      if (has_masters()) {
        masters = core::contiguous(read(name, s.in_param, s.in_param + s.length));
        into_units(*masters, at, 0);
      }
      params_->load_segment(b, s, masters, read);
      if (!with_state) continue;
      into_units(core::contiguous(read(name + ".exp_avg", s.in_param, s.in_param + s.length)), at, 1);
      into_units(core::contiguous(read(name + ".exp_avg_sq", s.in_param, s.in_param + s.length)), at, 2);
    }
    params_->shard_written(b);  // every segment's values are in
  }
  step_ = step;
}

}  // namespace trident::parallel
