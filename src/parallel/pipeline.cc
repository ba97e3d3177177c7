#include "parallel/pipeline.h"

#include <algorithm>
#include <chrono>

#include "autograd/engine.h"
#include "autograd/functions.h"
#include "core/allocator.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/profiler.h"
#include "ops/elementwise.h"

namespace trident::parallel {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

PipelineLayout PipelineLayout::make(int64_t layers, int stages, int virtual_stages, const std::vector<int64_t>& counts) {
  const int64_t n = static_cast<int64_t>(stages) * virtual_stages;
  TRI_CHECK(stages >= 1 && virtual_stages >= 1, "pipeline: parallel.pp (", stages, ") and parallel.virtual_stages (",
            virtual_stages, ") must be at least 1");
  TRI_CHECK(layers >= n, "pipeline: model.n_layer (", layers, ") must be at least parallel.pp x parallel.virtual_stages (",
            stages, " x ", virtual_stages, " = ", n, "): every chunk needs a block");
  PipelineLayout layout;
  layout.stages = stages;
  layout.virtual_stages = virtual_stages;
  std::vector<int64_t> sizes = counts;
  if (sizes.empty()) {
    for (int64_t k = 0; k < n; ++k) sizes.push_back(layers / n + (k < layers % n ? 1 : 0));
  } else {
    TRI_CHECK(static_cast<int64_t>(sizes.size()) == n, "pipeline: parallel.pipeline_layers has ", sizes.size(),
              " block counts; the pipeline has ", n, " chunks (pp x virtual_stages)");
    int64_t total = 0;
    for (int64_t c : sizes) {
      TRI_CHECK(c >= 1, "pipeline: parallel.pipeline_layers gives a chunk ", c, " blocks; each needs at least 1");
      total += c;
    }
    TRI_CHECK(total == layers, "pipeline: parallel.pipeline_layers adds up to ", total, " blocks; the model has ", layers);
  }
  int64_t at = 0;
  for (int64_t c : sizes) {
    layout.chunks.emplace_back(at, at + c);
    at += c;
  }
  return layout;
}

Pipeline::Pipeline(models::CausalLM& model, comm::Communicator& pp, PipelineLayout layout, std::string schedule,
                   int64_t sequence_split)
    : model_(model), pp_(pp), layout_(std::move(layout)), schedule_(std::move(schedule)), sequence_split_(sequence_split) {
  TRI_CHECK(pp_.size() == layout_.stages, "pipeline: ", layout_.stages, " stages on a group of ", pp_.size(), " ranks");
  TRI_CHECK(schedule_ == "gpipe" || schedule_ == "1f1b" || schedule_ == "interleaved",
            "pipeline: parallel.pipeline_schedule must be gpipe, 1f1b or interleaved, got \"", schedule_, "\"");
  TRI_CHECK((schedule_ == "interleaved") == (layout_.virtual_stages > 1),
            "pipeline: the interleaved schedule is the one with parallel.virtual_stages > 1 (got schedule \"", schedule_,
            "\" with ", layout_.virtual_stages, " virtual stages)");
  autograd::NoGradGuard no_grad;
  const std::optional<std::string> tied = model_.tied_head_weight();
  for (auto& [name, p] : model_.named_parameters()) {
    if (owner(name) == pp_.rank()) {
      params_.emplace_back(name, p);
    } else if (!(tied && name == *tied && pp_.rank() == layout_.stages - 1)) {
      p.set_data(empty({0}, p.dtype()));  // another stage's: never used here
    }
  }
  TRI_CHECK(!params_.empty(), "pipeline: rank ", pp_.rank(), " holds no parameters");
}

std::optional<Tensor> Pipeline::tied_weight() const {
  const std::optional<std::string> name = model_.tied_head_weight();
  if (!name) return std::nullopt;
  const Tensor w = model_.parameter(*name);
  // A frozen tied weight keeps the values every stage started with: the last stage's copy is
  // the same for the whole run, so nothing travels for it (no weights, no gradient).
  if (!w.requires_grad()) return std::nullopt;
  return w;
}

int PipelineLayout::stage_of_block(int64_t block) const {
  if (block == models::CausalLM::kEmbedding) return 0;
  if (block == models::CausalLM::kHead) return stages - 1;
  for (int c = 0; c < num_chunks(); ++c)
    if (block >= chunks[static_cast<size_t>(c)].first && block < chunks[static_cast<size_t>(c)].second)
      return rank_of_chunk(c);
  TRI_CHECK(false, "pipeline: block ", block, " is in no chunk (", num_chunks(), " chunks)");
}

std::vector<PipelineOp> pipeline_schedule(const std::string& schedule, const PipelineLayout& layout, int r, int m) {
  using Op = PipelineOp;
  const int P = layout.stages, v = layout.virtual_stages;
  std::vector<Op> ops;
  if (schedule == "gpipe") {
    for (int i = 0; i < m; ++i) ops.push_back({0, i, true});
    for (int i = 0; i < m; ++i) ops.push_back({0, i, false});
    return ops;
  }
  if (schedule == "1f1b") {
    const int warmup = std::min(P - r - 1, m);
    for (int i = 0; i < warmup; ++i) ops.push_back({0, i, true});
    for (int i = 0; i < m - warmup; ++i) {
      ops.push_back({0, warmup + i, true});
      ops.push_back({0, i, false});
    }
    for (int i = m - warmup; i < m; ++i) ops.push_back({0, i, false});
    return ops;
  }
  // Interleaved (Megatron-LM's forward_backward_pipelining_with_interleaving): micro-batches
  // in groups of P, each group through chunk 0, then chunk 1, ...; backwards mirror it.
  TRI_CHECK(m % P == 0, "pipeline: the interleaved schedule needs the micro-batches (data.grad_accum_steps = ", m,
            ") to be a multiple of parallel.pp (", P, ")");
  const int total = m * v;
  const int warmup = std::min((P - r - 1) * 2 + (v - 1) * P, total);
  auto micro = [&](int k) { return (k / (P * v)) * P + k % P; };
  auto fwd = [&](int k) { return Op{(k % (P * v)) / P, micro(k), true}; };
  auto bwd = [&](int k) { return Op{v - 1 - (k % (P * v)) / P, micro(k), false}; };
  for (int k = 0; k < warmup; ++k) ops.push_back(fwd(k));
  for (int k = 0; k < total - warmup; ++k) {
    Op f = fwd(warmup + k);
    f.with_next = true;
    ops.push_back(f);
    ops.push_back(bwd(k));
  }
  for (int k = total - warmup; k < total; ++k) ops.push_back(bwd(k));
  return ops;
}

void Pipeline::set_compute_dtype(DType compute) {
  TRI_CHECK(compute == DType::kBF16 || compute == DType::kF16, "pipeline: the compute dtype must be bf16 or f16, got ",
            compute);
  compute_ = compute;
  if (layout_.stages == 1 || pp_.rank() != layout_.stages - 1 || !tied_weight()) return;
  Tensor wte = *tied_weight();  // the last stage's copy of the tied weight
  {
    MemoryCategoryGuard params(MemoryCategory::kParameter);
    wte.set_data(core::cast(wte, compute));
  }
  head_grad_ = std::make_shared<std::optional<Tensor>>();
  autograd::register_grad_ready_hook(wte, [acc = head_grad_](const Tensor& leaf) {
    const std::optional<Tensor>& g = leaf.grad();
    if (!g.has_value()) return;
    MemoryCategoryGuard grads(MemoryCategory::kGradient);
    // The first (in the compute dtype) is cast to become the f32 sum; later ones are added
    // in slices (Note [Mixed-dtype add_], Note [The tied copy's gradient under mixed precision]).
    if (acc->has_value()) {
      ops::add_(**acc, *g);
    } else {
      *acc = core::contiguous(core::cast(*g, DType::kF32));
    }
    Tensor(leaf).zero_grad();
  });
}

Tensor Pipeline::recv(const Shape& shape, DType dtype, int src, int t) {
  Tensor out = empty(shape, dtype, device());
  const auto start = Clock::now();
  profiler::ProfileScope scope("pp.p2p", profiler::Phase::kCommunication);
  pp_.recv(out, src, t);
  wait_s_ += seconds_since(start);
  return out;
}

// Note [Batched point-to-point]
// NCCL pairs two ranks' messages by the order each side posts them (tags are MPI's only), and
// a send may wait until its receive is posted, holding up what its stream runs after it. In
// 1F1B's steady state a stage sends its output forward and then waits for a gradient from the
// next stage, which sends that gradient and then waits for the output: posted one by one the
// two sends wait for each other. So, as Megatron-LM's batch_isend_irecv, the sends of an op
// are posted together with the receives the rank's next op needs (one send_recv_async), or
// alone when it needs none (Megatron's send_forward_recv_backward and
// send_backward_recv_forward). The interleaved schedule's steady state needs more: a forward
// and the backward after it are one unit (Megatron's
// send_forward_backward_recv_forward_backward), both their receives before the forward, both
// their sends after the backward; op by op, its ranks deadlock. (Units in plain 1F1B would
// hold each forward's output until the next backward: half the step idle with 2 stages.)
// Every rank walks the micro-batches in one
// order, so both sides post each pair's messages in the same order; the weights of wte go
// first and the head's gradient last. Batches need not pair one to one (rank 0's lone send of
// wte meets the last rank's first batch, which also receives an activation); that no batch
// waits on a send its peer can only receive later is checked for every layout by
// PipelineTest.MessagesMatchedByOrderGiveTheTaggedLosses (tests/support/order_matched_communicator.h).
// Note [Releasing sent tensors]
// A send reads its tensor until it completes, so the tensor lives as long as its send: a
// batch with receives is waited on whole (its sends with it); a batch of sends alone is kept
// with what it reads and dropped once test() says it completed, checked after every wait and
// every backward. Keeping every sent tensor to the step's end instead held each chunk's
// output past its backward: under the interleaved schedule, v m outputs and input gradients
// at the end (124M pp2x6 m4: 9% over the planner's activation peak, which frees them there).
void Pipeline::release_completed_sends() {
  sends_.erase(std::remove_if(sends_.begin(), sends_.end(),
                              [](InFlightSend& s) {
                                if (!s.work->test()) return false;
                                s.work->wait();  // returns at once; throws if the send failed
                                return true;
                              }),
               sends_.end());
}

double Pipeline::train_step(const std::vector<MicroBatch>& micro, double loss_seed,
                            const std::function<void(bool last)>& before_backward) {
  const auto start = Clock::now();
  wait_s_ = 0.0;
  const int m = static_cast<int>(micro.size()), P = layout_.stages, last_chunk = layout_.num_chunks() - 1;
  const int r = pp_.rank();
  const int weight_tag = 2 * layout_.num_chunks() * m, grad_tag = weight_tag + 1;
  // MPI guarantees tags up to 32767 only (MPI_TAG_UB may be no larger).
  TRI_CHECK(grad_tag <= 32767, "pipeline: ", m, " micro-batches over ", layout_.num_chunks(),
            " chunks need message tags up to ", grad_tag, "; MPI guarantees 32767: use fewer micro-batches per step");
  // The tied weight (GPT-2's wte: "wte" below), when the model has one.
  const std::optional<Tensor> tied = tied_weight();
  const Device device = this->device();
  const int64_t C = model_.model_config().n_embd;
  struct Live {
    std::optional<Tensor> in, out;  // a chunk's received input (a leaf) and its output or loss
    std::optional<Tensor> grad;     // the gradient of out received from the next chunk
  };
  std::vector<std::vector<Live>> live(static_cast<size_t>(layout_.virtual_stages), std::vector<Live>(static_cast<size_t>(m)));
  std::vector<double> losses(static_cast<size_t>(m), 0.0);
  std::optional<Tensor> head;  // rank 0: the head's gradient of the tied weight, from the last rank

  std::vector<comm::PeerOp> pending;  // sends waiting to go out with the next receives
  auto send = [&](const Tensor& t, int dst, int t_tag) { pending.push_back({comm::PeerOp::Kind::kSend, t, dst, t_tag}); };
  // Posts the pending sends with `receives`, and waits for the batch when it receives.
  auto exchange = [&](const std::vector<comm::PeerOp>& receives) {
    std::vector<comm::PeerOp> batch = std::move(pending);
    pending.clear();
    batch.insert(batch.end(), receives.begin(), receives.end());
    if (batch.empty()) return;
    profiler::ProfileScope scope("pp.p2p", profiler::Phase::kCommunication);
    std::unique_ptr<comm::Work> work = pp_.send_recv_async(batch);
    if (receives.empty()) {
      std::vector<Tensor> reads;
      for (const comm::PeerOp& op : batch) reads.push_back(op.tensor);
      sends_.push_back({std::move(work), std::move(reads)});
      return;
    }
    const auto t = Clock::now();
    work->wait();  // the batch's sends too: `batch` kept what they read until now
    wait_s_ += seconds_since(t);
    release_completed_sends();
  };
  // What op `op` receives before it runs, into the Live slots it reads.
  auto receives = [&](const Op& op) {
    std::vector<comm::PeerOp> out;
    const int c = chunk_of(op.local_chunk);
    Live& state = live[static_cast<size_t>(op.local_chunk)][static_cast<size_t>(op.micro)];
    if (op.forward && c > 0) {
      const MicroBatch& mb = micro[static_cast<size_t>(op.micro)];
      state.in = empty({mb.inputs.size(0), mb.inputs.size(1) / sequence_split_, C}, compute_, device);
      out.push_back({comm::PeerOp::Kind::kRecv, *state.in, layout_.rank_of_chunk(c - 1), tag(c - 1, op.micro, true, m)});
    }
    if (!op.forward && c != last_chunk) {
      state.grad = empty(state.out->shape(), state.out->dtype(), device);
      out.push_back({comm::PeerOp::Kind::kRecv, *state.grad, layout_.rank_of_chunk(c + 1), tag(c + 1, op.micro, false, m)});
    }
    if (!op.forward && c == 0 && op.micro == m - 1 && P > 1 && tied) {
      head = empty(tied->shape(), DType::kF32, device);
      out.push_back({comm::PeerOp::Kind::kRecv, *head, P - 1, grad_tag});
    }
    return out;
  };

  const std::vector<Op> ops = schedule(m);
  // The receives of the unit that starts at ops[k] (one op, or a steady forward and backward).
  auto unit_receives = [&](size_t k) {
    std::vector<comm::PeerOp> out = receives(ops[k]);
    if (ops[k].with_next) {
      std::vector<comm::PeerOp> more = receives(ops[k + 1]);
      out.insert(out.end(), more.begin(), more.end());
    }
    return out;
  };
  std::vector<comm::PeerOp> first = ops.empty() ? std::vector<comm::PeerOp>{} : unit_receives(0);
  if (P > 1 && tied) {  // the head's copy of the tied weight gets this step's values, before anything else
    if (r == 0) send(*tied, P - 1, weight_tag);
    else if (r == P - 1) first.insert(first.begin(), {comm::PeerOp::Kind::kRecv, *tied, 0, weight_tag});
  }
  exchange(first);
  for (size_t k = 0; k < ops.size(); ++k) {
    const Op& op = ops[k];
    const int c = chunk_of(op.local_chunk);
    const MicroBatch& mb = micro[static_cast<size_t>(op.micro)];
    Live& state = live[static_cast<size_t>(op.local_chunk)][static_cast<size_t>(op.micro)];
    if (op.forward) {
      const Tensor x = [&] {
        if (c == 0) return model_.embed(mb.inputs, mb.docs());
        Tensor in = *state.in;
        in.set_requires_grad(true);
        return in;
      }();
      const auto [first_block, end_block] = layout_.chunks[static_cast<size_t>(c)];
      Tensor y = model_.run_blocks(x, first_block, end_block, mb.docs());
      if (c == last_chunk) {
        Tensor loss = model_.head_loss(y, mb.targets);
        losses[static_cast<size_t>(op.micro)] = mb.weighed(loss.item());
        const double seed = loss_seed * mb.weight;
        state.out = seed == 1.0 ? loss : loss * seed;
      } else {
        y = core::contiguous(y);
        // The receiver allocated compute_: a byte count that differs would hang NCCL.
        TRI_CHECK(y.dtype() == compute_, "pipeline: chunk ", c, " produced ", y.dtype(), " activations; the stages ",
                  "exchange ", compute_);
        send(y, layout_.rank_of_chunk(c + 1), tag(c, op.micro, true, m));
        state.out = y;
      }
    } else {
      const bool last = op.micro == m - 1;
      if (c == 0 && last && P > 1 && tied) {
        // The head's gradient of the tied weight joins this rank's before the final backward
        // through the embedding (in fp32 under mixed precision, where the sink accumulates).
        Tensor wte = *tied;
        if (head_sink_) {
          head_sink_(*head);
        } else {
          const Tensor h = core::cast(*head, wte.dtype());
          if (wte.grad().has_value()) ops::add_(*wte.grad(), h);
          else wte.mutable_grad() = h;
        }
        head.reset();
      }
      before_backward(last);
      if (c == last_chunk) {
        autograd::backward(*state.out);
      } else {
        autograd::backward(std::vector<Tensor>{*state.out}, {std::optional<Tensor>(*state.grad)});
      }
      if (c > 0) {
        TRI_CHECK(!state.in->grad().has_value() || state.in->grad()->dtype() == compute_, "pipeline: chunk ", c,
                  "'s input gradient is ", state.in->grad()->dtype(), "; the stages exchange ", compute_);
        send(state.in->grad().has_value() ? core::contiguous(*state.in->grad())
                                          : zeros(state.in->shape(), state.in->dtype(), state.in->device()),
             layout_.rank_of_chunk(c - 1), tag(c, op.micro, false, m));
      }
      state = Live{};
      release_completed_sends();
    }
    // Between units: this unit's sends with the next unit's receives.
    if (!op.with_next && k + 1 < ops.size()) exchange(unit_receives(k + 1));
  }
  if (P > 1 && r == P - 1 && tied) {
    // The head's gradient of the tied weight, after everything else this rank sends (fp32:
    // mixed precision summed it in head_grad_).
    send(head_grad_ && head_grad_->has_value() ? **head_grad_
         : tied->grad().has_value()            ? core::contiguous(core::cast(*tied->grad(), DType::kF32))
                                               : zeros(tied->shape(), DType::kF32, device),
         0, grad_tag);
  }
  exchange({});
  {
    profiler::ProfileScope scope("pp.p2p", profiler::Phase::kCommunication);
    for (InFlightSend& s : sends_) s.work->wait();
  }
  sends_.clear();
  if (P > 1 && r == P - 1 && tied) {  // the copy's gradient went to rank 0
    Tensor(*tied).mutable_grad().reset();
    if (head_grad_) head_grad_->reset();
  }
  // Every stage reports the step's loss (only the last one computed it, the others add 0).
  // An all-reduce rather than a broadcast: every stage ends the step together, so a stage
  // that finished early counts the wait for the others as idle, as the bubble does.
  double total = 0.0;
  for (double l : losses) total += l;
  Tensor t = full({1}, total, DType::kF64);
  const auto tail = Clock::now();
  profiler::ProfileScope scope("pp.all_reduce", profiler::Phase::kCommunication);
  pp_.all_reduce(t);
  wait_s_ += seconds_since(tail);
  step_s_ = seconds_since(start);
  return t.item();
}

double Pipeline::evaluate(const std::vector<MicroBatch>& batches) {
  autograd::NoGradGuard no_grad;
  const int m = static_cast<int>(batches.size()), P = layout_.stages, last_chunk = layout_.num_chunks() - 1;
  const int weight_tag = 2 * layout_.num_chunks() * m;
  TRI_CHECK(weight_tag <= 32767, "pipeline: ", m, " evaluation batches over ", layout_.num_chunks(),
            " chunks need message tags up to ", weight_tag, "; MPI guarantees 32767: use fewer train.eval_batches");
  if (const std::optional<Tensor> tied = tied_weight(); P > 1 && tied) {
    profiler::ProfileScope scope("pp.p2p", profiler::Phase::kCommunication);
    if (pp_.rank() == 0) pp_.send(*tied, P - 1, weight_tag);
    else if (pp_.rank() == P - 1) pp_.recv(*tied, 0, weight_tag);
  }
  const int64_t C = model_.model_config().n_embd;
  double total = 0.0;
  for (int i = 0; i < m; ++i) {
    const MicroBatch& mb = batches[static_cast<size_t>(i)];
    const Shape act{mb.inputs.size(0), mb.inputs.size(1) / sequence_split_, C};
    for (int lc = 0; lc < layout_.virtual_stages; ++lc) {
      const int c = chunk_of(lc);
      const Tensor x =
          c == 0 ? model_.embed(mb.inputs, mb.docs()) : recv(act, compute_, layout_.rank_of_chunk(c - 1), tag(c - 1, i, true, m));
      const auto [first, end] = layout_.chunks[static_cast<size_t>(c)];
      const Tensor y = model_.run_blocks(x, first, end, mb.docs());
      if (c == last_chunk) total += mb.weighed(model_.head_loss(y, mb.targets).item());
      else {
        profiler::ProfileScope scope("pp.p2p", profiler::Phase::kCommunication);
        pp_.send(core::contiguous(y), layout_.rank_of_chunk(c + 1), tag(c, i, true, m));
      }
    }
  }
  Tensor t = full({1}, total, DType::kF64);
  profiler::ProfileScope scope("pp.broadcast", profiler::Phase::kCommunication);
  pp_.broadcast(t, P - 1);
  return t.item();
}

}  // namespace trident::parallel
