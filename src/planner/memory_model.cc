#include "planner/memory_model.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "core/half.h"
#include "core/parallel.h"
#include "kernels/cpu/gemm_engine.h"
#include "kernels/cpu/matmul.h"
#include "models/causal_lm.h"
#include "planner/block_activations.h"
#include "planner/fine_tuning.h"
#include "planner/nvme_tier.h"
#include "planner/placements.h"
#include "planner/zero_buckets.h"
#include "models/registry.h"
#include "ops/elementwise.h"
#include "ops/loss.h"
#include "parallel/pipeline.h"

namespace trident::planner {
namespace {

using models::CausalLM;
using models::ModelShapes;
using models::ParameterShape;
using models::SavedActivation;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// What one pipeline stage holds.
struct Stage {
  std::vector<int64_t> numels;  // its trained parameters' local elements, in model order
  std::vector<int64_t> where;   // their CausalLM::block_of
  int64_t frozen_bytes = 0;     // its frozen parameters' (Note [The planner's fine-tuning])
  std::vector<bool> expert;     // placed by expert parallelism (reduced over dp alone)
  int64_t blocks = 0;           // blocks over all its chunks
  int64_t chunk_blocks = 0;     // blocks of its largest chunk
  std::vector<std::pair<int64_t, int64_t>> chunks;  // its chunks' blocks [begin, end)
  bool first = false, last = false;
  int64_t layers = 0;           // the model's
};

Stage stage_of(const RunSpec& run, const Layout& l, int64_t layers, int stage) {
  const parallel::PipelineLayout pl = parallel::PipelineLayout::make(layers, static_cast<int>(l.pp),
                                                                     static_cast<int>(l.virtual_stages));
  Stage s;
  s.layers = layers;
  s.first = stage == 0;
  s.last = stage == l.pp - 1;
  for (int c = 0; c < pl.num_chunks(); ++c) {
    if (pl.rank_of_chunk(c) != stage) continue;
    const auto [b, e] = pl.chunks[static_cast<size_t>(c)];
    s.blocks += e - b;
    s.chunk_blocks = std::max(s.chunk_blocks, e - b);
    s.chunks.emplace_back(b, e);
  }
  // The stage's parameters and their shares, as the trainer places them.
  const StageParameters& held = stages_of(run, l)[static_cast<size_t>(stage)];
  s.numels = held.numels;
  s.where = held.blocks;
  s.expert = held.expert;
  s.frozen_bytes = held.frozen_bytes;
  return s;
}

int64_t sum(const std::vector<int64_t>& v) {
  int64_t n = 0;
  for (int64_t x : v) n += x;
  return n;
}

// Note [Leaf gradients]
// Activation-sized gradients that autograd gives to leaves, and so counts as gradients
// (AccumulateGrad retags what it keeps), beside the parameters' once every micro-batch has
// run its first backward: a checkpointed block's rerun takes its input as a leaf, and a
// pipeline chunk after the first takes what it receives as a leaf (its gradient is what goes
// back). In units of one micro-batch's (tokens, C) in the compute dtype, measured per rank on
// a tiny LLaMA (per-rank allocator peaks, pp 2 and 4, interleaved pp2x2, 1 and 2 blocks per
// chunk):
//  * without checkpointing, 2 on a rank whose chunks all come after the first (the one being
//    made and the one before it, still going out), 1 on an interleaved first rank with more
//    micro-batches than stages (GPT-2 pp2x2 and pp4x3 with as many as stages: 0), 0 on the
//    first rank otherwise;
//  * with checkpointing (and more than one micro-batch), one per block rerun beside another,
//    min(blocks per chunk, 2), plus one for the received input on a rank whose chunks all
//    come after the first.
// (GPT-2's pipelines had these too; its first stage, with the embeddings, hid them.)
// Under mixed precision the first stage folds its embedding's gradient into the master's last,
// after every block's backward, when no leaf gradient is left: the leaves count beside the
// blocks' folds only (1 MiB over at tiny GPT-2's bf16 tp4 b4 before). On a later stage a
// block's gradient is folded before its chunk's input gradient is made: one leaf fewer is
// alive then (pp4's middle stages were one (tokens, C) over).
// With checkpointing and one micro-batch the leaves are there too, but while the first block's
// backward runs, when the gradients of that block and of the embedding are not made yet: a
// frozen base's peak (LoRA on a tiny LLaMA, bf16 ckpt=full b8 m1: 1.8 MiB under without them),
// under the parameters' at the backward's end otherwise (rerun_leaves below).
// The first block's input needs no gradient when the embedding is frozen (LoRA): its rerun
// makes no leaf gradient (a tiny LLaMA's tp2 pp2 first stage of two blocks: one (tokens, C)
// over when counted).
double rerun_leaves(const Stage& s, const Layout& l) {
  int64_t per_chunk = l.virtual_stages > 1 ? s.chunk_blocks : s.blocks;
  const bool embedding_trains = std::find(s.where.begin(), s.where.end(), CausalLM::kEmbedding) != s.where.end();
  if (s.first && l.virtual_stages == 1 && !embedding_trains) per_chunk -= 1;
  return static_cast<double>(std::clamp<int64_t>(per_chunk, 0, 2)) + (s.first ? 0.0 : 1.0);
}

double leaf_gradients(const Stage& s, const Layout& l) {
  const bool later_only = !s.first, interleaved_first = s.first && l.virtual_stages > 1;
  if (l.checkpointing == "none") return later_only ? 2.0 : interleaved_first && l.accum > l.pp ? 1.0 : 0.0;
  if (l.accum == 1) return 0.0;
  return rerun_leaves(s, l);
}

// Note [Leaf gradients under ZeRO]
// ZeRO's flat gradient buffers exist from the step's start, so the leaves count beside them
// whatever the micro-batches; a block's parameter gradient arrives beside one leaf fewer (the
// block's input gradient comes after its parameters'). With full fine-tuning the embedding's
// gradient hides them; with a frozen base they are the peak beyond the buffers (LoRA on a tiny
// LLaMA, dp2 ckpt=full b2 m2: ZeRO-1 1.0 MiB, ZeRO-2 0.5 MiB under without them).
double zero_leaves(const Stage& s, const Layout& l) {
  return l.checkpointing == "none" ? leaf_gradients(s, l) : rerun_leaves(s, l);
}

// Note [The tied copy's fold under interleaving]
// A parameter's f32 gradient (the master's, under mixed precision) exists from its first
// backward on. Under the interleaved schedule the last stage runs the head's backward of the
// second micro-batch, where the tied copy's gradient is first folded in slices, before its
// earlier chunks have run any backward: their blocks' gradients do not exist yet. Counting
// them was 3.4-3.7 MB (4%) over on tiny GPT-2's bf16 pp2x2 m2 last stages. Every later
// micro-batch folds the same, so the peak is at the last one's, with the most gradients.
// The elements of stage r whose gradients exist when the head's backward of the last
// micro-batch runs (none with one micro-batch: that backward is the stage's first).
int64_t masters_before_head(const Stage& s, const Layout& l, int r) {
  if (l.accum < 2) return 0;
  const parallel::PipelineLayout pl = parallel::PipelineLayout::make(s.layers, static_cast<int>(l.pp),
                                                                     static_cast<int>(l.virtual_stages));
  const int head_chunk = static_cast<int>(l.virtual_stages) - 1;
  std::vector<bool> done(static_cast<size_t>(l.virtual_stages), false);
  for (const parallel::PipelineOp& op : parallel::pipeline_schedule(l.pipeline_schedule(), pl, r, static_cast<int>(l.accum))) {
    if (op.forward) continue;
    if (op.local_chunk == head_chunk && op.micro == l.accum - 1) break;
    done[static_cast<size_t>(op.local_chunk)] = true;
  }
  int64_t n = 0;
  for (size_t k = 0; k < s.numels.size(); ++k) {
    // A block's local chunk; the head's parameters are the last chunk's.
    int chunk = head_chunk;
    if (s.where[k] >= 0)
      for (int c = 0; c < pl.num_chunks(); ++c)
        if (s.where[k] >= pl.chunks[static_cast<size_t>(c)].first && s.where[k] < pl.chunks[static_cast<size_t>(c)].second)
          chunk = c / static_cast<int>(l.pp);
    if (done[static_cast<size_t>(chunk)]) n += s.numels[k];
  }
  return n;
}

// Micro-batches (of one chunk) stage r keeps at once: 1F1B's warm-up forwards plus the one
// running; interleaved 1F1B's (Megatron's count: 2 (p - r - 1) + (v - 1) p warm-up chunks).
int64_t in_flight(const Layout& l, int64_t r) {
  if (l.pp == 1) return 1;
  if (l.virtual_stages == 1) return std::min(l.pp - r, l.accum);
  return std::min(l.accum * l.virtual_stages, 2 * (l.pp - r - 1) + (l.virtual_stages - 1) * l.pp + 1);
}

// Note [Interleaved chunks in flight]
// Under the interleaved schedule a rank's chunks need not hold as many blocks each (GPT-2
// small's 6 layers over pp2x2: chunks of 2, 2, 1 and 1), so what its in-flight chunks keep is
// the schedule's count chunk by chunk, not in_flight's count at the largest chunk's bytes: that
// put the first stage's activations 7% over with 4 micro-batches and 30% over with 2 (per-rank
// allocator peaks, dense and LoRA alike). Bytes per token of each of stage r's chunks, in
// local order; the most alive at once on the schedule the Pipeline runs.
// Also what is alive when chunk 0's first backward starts (that micro-batch's included: Note
// [The embedding's backward in a pipeline]) and, at most, when the rank's last chunk has run a
// forward: on the last stage the head runs then, and the peak of the blocks alone can come at
// another chunk's forward (pp2x2 with 4 micro-batches: 6 blocks' worth alive after a first
// chunk's forward, 5 when the head runs; counting the head on top of 6 put that stage 5.6% over).
struct ChunksInFlight {
  double peak = 0.0;
  double at_first_backward = 0.0;
  double at_last_forward = 0.0;
};
ChunksInFlight chunks_in_flight(const Layout& l, int64_t layers, int64_t r, const std::vector<double>& chunk_bytes) {
  const parallel::PipelineLayout pl = parallel::PipelineLayout::make(layers, static_cast<int>(l.pp),
                                                                     static_cast<int>(l.virtual_stages));
  ChunksInFlight out;
  double live = 0.0;
  bool seen = false;
  for (const parallel::PipelineOp& op :
       parallel::pipeline_schedule(l.pipeline_schedule(), pl, static_cast<int>(r), static_cast<int>(l.accum))) {
    if (!op.forward && op.local_chunk == 0 && !seen) {
      out.at_first_backward = live;
      seen = true;
    }
    const double bytes = chunk_bytes[static_cast<size_t>(op.local_chunk)];
    live += op.forward ? bytes : -bytes;
    out.peak = std::max(out.peak, live);
    if (op.forward && op.local_chunk + 1 == static_cast<int>(chunk_bytes.size()))
      out.at_last_forward = std::max(out.at_last_forward, live);
  }
  return out;
}

// Micro-batch chunks the first stage has in flight when it starts its first backward of
// chunk 0 (that one included), on the schedule the Pipeline runs (parallel::pipeline_schedule):
// all of in_flight's under 1F1B, fewer under the interleaved schedule when the micro-batches
// are as few as the stages (it runs every forward first).
// The first stage's ops, in the order the Pipeline runs them.
std::vector<parallel::PipelineOp> first_stage_schedule(const Layout& l, int64_t layers) {
  const parallel::PipelineLayout pl = parallel::PipelineLayout::make(layers, static_cast<int>(l.pp),
                                                                     static_cast<int>(l.virtual_stages));
  return parallel::pipeline_schedule(l.pipeline_schedule(), pl, 0, static_cast<int>(l.accum));
}

int64_t in_flight_at_first_backward(const Layout& l, int64_t layers) {
  int64_t live = 0;
  for (const parallel::PipelineOp& op : first_stage_schedule(l, layers)) {
    if (!op.forward && op.local_chunk == 0) return live;
    live += op.forward ? 1 : -1;
  }
  return live;
}

// Micro-batches whose chunk 0 has run its forward and not its backward, at most, on the first
// stage (on the schedule the Pipeline runs): how many of the embedding's saved tensors live.
int64_t chunk0_in_flight(const Layout& l, int64_t layers) {
  if (l.pp == 1) return 1;
  int64_t live = 0, most = 0;
  for (const parallel::PipelineOp& op : first_stage_schedule(l, layers)) {
    if (op.local_chunk != 0) continue;
    live += op.forward ? 1 : -1;
    most = std::max(most, live);
  }
  return most;
}

// The order in which the backward makes a stage's parameter gradients final (indices into
// s.numels): the blocks' parameters in reverse model order (the backward runs the blocks
// backwards), then the embedding's in model order (the sum of the lookups hands its gradient
// to them in argument order).
std::vector<size_t> gradient_order(const Stage& s) {
  std::vector<size_t> order;
  for (size_t k = s.numels.size(); k-- > 0;)
    if (s.where[k] != CausalLM::kEmbedding) order.push_back(k);
  for (size_t k = 0; k < s.numels.size(); ++k)
    if (s.where[k] == CausalLM::kEmbedding) order.push_back(k);
  return order;
}

// Note [Staged buckets] (parallel/zero/staged_gradients.cc): ZeRO 2-3's staging buffers at their peak, by
// following the backward's gradients as they arrive (gradient_order). A bucket is staged (f32, its
// padded length) from its first gradient; at its last it is posted and the one posted before
// is folded in. At each arrival: the open buckets, the posted one and the autograd gradient
// being copied in (the compute dtype), with the leaf gradients beside a block's (Note [Leaf
// gradients under ZeRO]). ZeRO-3's buckets are the model's parts, so the root
// part (embedding, final norm, head) stays open from the first gradient to the last.
// With several reduction groups (expert parallelism) each group's optimizer posts its own
// buckets: `owner` names each bucket's group.
double staged_peak(const Stage& s, const std::vector<std::vector<size_t>>& groups, const std::vector<size_t>& owner,
                   const std::vector<int64_t>& padded, int64_t E, double leaves, double unit) {
  std::vector<size_t> bucket(s.numels.size());
  std::vector<size_t> pending(groups.size());
  for (size_t j = 0; j < groups.size(); ++j) {
    pending[j] = groups[j].size();
    for (size_t k : groups[j]) bucket[k] = j;
  }
  double peak = 0.0;
  int64_t open = 0;  // staged elements: buckets still filling
  std::vector<int64_t> posted_by(owner.empty() ? 1 : *std::max_element(owner.begin(), owner.end()) + 1, 0);
  auto posted_sum = [&] {
    int64_t n = 0;
    for (int64_t p : posted_by) n += p;
    return n;
  };
  for (size_t k : gradient_order(s)) {
    const size_t j = bucket[k];
    if (pending[j] == groups[j].size()) open += padded[j];
    // A block's gradient arrives beside its leaves but one; its input's gradient comes after
    // (Note [Leaf gradients under ZeRO]).
    const double beside = s.where[k] >= 0 ? std::max(static_cast<double>(E * s.numels[k]) + std::max(leaves - 1.0, 0.0) * unit,
                                                     leaves * unit)
                                          : static_cast<double>(E * s.numels[k]);
    peak = std::max(peak, 4.0 * static_cast<double>(open + posted_sum()) + beside);
    if (--pending[j] == 0) {
      open -= padded[j];
      posted_by[owner[j]] = padded[j];  // the group's previous one folded in
    }
  }
  return peak;
}

// Note [ZeRO-Offload's memory]
// On a device, ZeRO-Offload keeps the fp32 masters and AdamW's moments (12 P, or their 1/dp
// shards) in the host's (pinned) memory, and under mixed precision the masters rounded to the
// compute dtype on their way back to the device (E P). The device keeps the compute-dtype
// parameters and:
//  * without ZeRO (one rank, optim/mixed_precision.h): each parameter's gradient, in the
//    compute dtype, from the moment the backward makes it final until its copy to the host is
//    waited for, which happens once more than a bucket (parallel.bucket_mb) is in flight (Note
//    [Offloaded gradients in flight]). The host keeps every copy (E P) until the backward's end
//    adds them to the masters' fp32 gradients (4 P).
//  * under ZeRO (parallel/zero.h): its gradient buffers as without offload; the host has a copy
//    of the averaged gradient shard (4 P / dp).
// On tiny GPT-2 on the emulated device (tests/planner_mpi) both memories matched the allocators'
// peaks to the byte. Offload's memory follows RunSpec::on_device (trident plan sets it from a GPU
// cluster), its PCIe time the cluster's kind.

// The batches of gradient copies, in elements, in gradient_order.
struct OffloadBatch {
  int64_t elements = 0;
  bool embedding = false;  // holds an embedding table's: the leaves' gradients are gone by then
};
std::vector<OffloadBatch> offload_batches(const Stage& s, int64_t E, int64_t bucket_bytes) {
  std::vector<OffloadBatch> batches;
  OffloadBatch open;
  for (size_t k : gradient_order(s)) {
    open.elements += s.numels[k];
    open.embedding = open.embedding || s.where[k] == CausalLM::kEmbedding;
    if (E * open.elements > bucket_bytes) batches.push_back(std::exchange(open, OffloadBatch{}));
  }
  if (open.elements > 0) batches.push_back(open);
  return batches;
}

// The host memory oneDNN's scratchpad takes in the head's logits GEMM on a CPU, (rows, C) @
// (cols, C)^T into a product of the compute dtype with row stride ld, on the run's threads
// (Note [oneDNN's scratchpad] in kernels/cpu/onednn_gemm.cc).
double logits_gemm_scratch(const RunSpec& run, int64_t rows, int64_t cols, int64_t C, int64_t ld) {
  if (run.on_device || rows <= 0 || cols <= 0) return 0.0;
  using kernels::cpu::gemm_engine_scratch_bytes;
  if (run.compute == DType::kBF16)
    return static_cast<double>(
        gemm_engine_scratch_bytes<bf16>(run.gemm_engines, run.threads, false, true, rows, cols, C, C, C, ld));
  if (run.compute == DType::kF32)
    return static_cast<double>(
        gemm_engine_scratch_bytes<float>(run.gemm_engines, run.threads, false, true, rows, cols, C, C, C, ld));
  return 0.0;  // f16 widens: its scratch is Note [Widened head GEMMs]'s
}

}  // namespace

int64_t MemoryEstimate::total() const {
  int64_t t = 0;
  for (int64_t b : peak_bytes) t += b;
  return t;
}

int64_t MemoryEstimate::host_total() const {
  int64_t t = 0;
  for (int64_t b : host_peak_bytes) t += b;
  return t;
}

MemoryEstimate predict_memory(const RunSpec& run, const Layout& l, bool communicator) {
  const ModelShapes& shapes = run.shapes;
  const int64_t E = static_cast<int64_t>(element_size(run.compute));
  const int64_t V = run.model.vocab_size, C = run.model.n_embd, T = run.seq_len;
  const int64_t tokens = l.micro_batch * T;  // one micro-batch on one data-parallel rank
  // One micro-batch's (tokens, C) in the compute dtype, split by sequence parallelism: a
  // pipeline's send and receive, a leaf's gradient.
  const double unit = static_cast<double>(tokens * C * E) / (l.sequence_parallel ? l.tp : 1);
  const bool tied = shapes.tied_head_weight.has_value();
  // Note [A frozen head and embedding]
  // The fused head makes no dw for a frozen weight, and a frozen embedding no dense gradient
  // (LoRA's base: the tied copy on a pipeline's last stage has none to send back either). LoRA
  // on a tiny LLaMA had its activations (V, C) f32 over in every checkpointed layout.
  const bool head_trains = head_weight_trains(run);
  std::vector<bool> table_trains;  // per parameter of the embedding, in shapes.parameters order
  for (size_t i = 0; i < shapes.parameters.size(); ++i)
    table_trains.push_back(shapes.parameters[i].block == CausalLM::kEmbedding && run.holding_of(i) == Holding::kTrained);
  const bool tied_trains = tied && head_trains;
  const bool embedding_trains = std::find(table_trains.begin(), table_trains.end(), true) != table_trains.end();
  const int64_t head_rows = ceil_div(V, l.tp);  // the head's (and a tied embedding's) rows here
  const bool comm = communicator || l.ranks() > 1;
  MemoryEstimate out;
  out.stage_peak_bytes.assign(static_cast<size_t>(l.pp), {});
  int64_t r = 0;  // the stage being predicted
  auto raise = [&](MemoryCategory c, double bytes) {
    for (int64_t* slot : {&out.peak_bytes[static_cast<size_t>(c)],
                          &out.stage_peak_bytes[static_cast<size_t>(r)][static_cast<size_t>(c)]})
      *slot = std::max(*slot, static_cast<int64_t>(bytes));
  };
  // Note [ZeRO-Offload's memory]: on CPU ranks offload moves state between buffers of one memory.
  const bool offloaded = l.offload && run.on_device;
  auto raise_host = [&](MemoryCategory c, double bytes) {
    int64_t& slot = out.host_peak_bytes[static_cast<size_t>(c)];
    slot = std::max(slot, static_cast<int64_t>(bytes));
  };
  for (; r < l.pp; ++r) {
    const Stage s = stage_of(run, l, run.model.n_layer, static_cast<int>(r));
    const int64_t P = sum(s.numels);
    const int64_t p_max = s.numels.empty() ? 0 : *std::max_element(s.numels.begin(), s.numels.end());
    const int64_t tied_copy = (l.pp > 1 && tied && s.last) ? head_rows * C : 0;
    // ZeRO's flat buffers, one per reduction group, each bucket padded to its group's ranks
    // (planner/zero_buckets.h).
    const ZeroBuckets z = zero_buckets(s.numels, s.where, s.expert, l, run.model.n_layer, run.bucket_bytes);
    const std::vector<std::vector<size_t>>& groups = z.members;
    const std::vector<size_t>& owner = z.owner;
    const std::vector<int64_t>& bucket_sizes = z.padded;
    const int64_t flat = z.flat, shard = z.shard;  // every group's flat buffer, and this rank's shards of them

    // Parameters: the trained ones as the layout places them, the frozen ones whole on every
    // data-parallel rank (in the compute dtype or NF4). FSDP's ZeRO-3 keeps no compute-dtype
    // shard beside its fp32 ones, which the optimizer category counts (Note [Framework conventions]).
    const double frozen = static_cast<double>(s.frozen_bytes);
    if (l.zero_stage == 0) raise(MemoryCategory::kParameter, static_cast<double>(E * (P + tied_copy)) + frozen);
    else if (l.zero_stage < 3) raise(MemoryCategory::kParameter, static_cast<double>(E * (flat + tied_copy)) + frozen);
    else if (run.mixed() && !run.convention.keeps_compute_shard) raise(MemoryCategory::kParameter, frozen);
    else raise(MemoryCategory::kParameter, static_cast<double>(E * shard) + frozen);

    // Gradients (the last stage's tied copy accumulates its fp32 gradient for rank 0).
    // Note [The tied copy's gradient under mixed precision]
    // Under bf16/fp16 the copy is in the compute dtype, and parallel/pipeline.cc's hook folds
    // each micro-batch's gradient into an f32 sum: the first is cast and kept, later ones are
    // added in slices (Note [Mixed-dtype add_]), so while the second arrives the sum (4), the
    // gradient (E) and one converted slice are alive. That happens in the head's backward, the
    // first of each micro-batch's, not while a block's gradient is folded into its master, and
    // while only the previous micro-batch's leaf gradient is still going out. Counting 4 bytes
    // was 53% under on tiny GPT-2's bf16 tp2 pp2 last stage (33 MB against 71, when later
    // gradients were cast whole); counting the fold on top of a block's, 1-2% over.
    const auto slice = [&](int64_t n) { return 4.0 * static_cast<double>(std::min(n, ops::kMixedAddSliceElements)); };
    const int64_t copy_trained = tied_trains ? tied_copy : 0;
    const double copy_grad = 4.0 * static_cast<double>(copy_trained);
    const double copy_fold =
        run.mixed() ? static_cast<double>(E * copy_trained) + (l.accum > 1 ? slice(copy_trained) : 0.0) : 0.0;
    const double leaves_at_head = !s.first && l.accum > 1 ? unit : 0.0;
    if (l.zero_stage == 0 && offloaded) {
      // Note [ZeRO-Offload's memory]: one rank, no pipeline; the leaves as without offload,
      // until the embedding's gradients (Note [Leaf gradients]). Under mpirun the host's data
      // parallelism has its buckets, as the device's would (4 P).
      const double leaves = leaf_gradients(s, l) * unit;
      double in_flight = 0.0;
      for (const OffloadBatch& b : offload_batches(s, E, run.bucket_bytes))
        in_flight = std::max(in_flight, static_cast<double>(E * b.elements) + (b.embedding ? 0.0 : leaves));
      // At the backward's end every copy is on the host. The first micro-batch widens them into
      // new fp32 sums (fp32: the copies become the sums); later ones add to the sums, a
      // converted slice at a time.
      const double copies = static_cast<double>(E * P), sums = 4.0 * static_cast<double>(P);
      const double host =
          sums + (run.mixed() || l.accum > 1 ? copies : 0.0) + (run.mixed() && l.accum > 1 ? slice(p_max) : 0.0);
      raise(MemoryCategory::kGradient, in_flight);
      raise_host(MemoryCategory::kGradient, host + (comm ? 4.0 * static_cast<double>(P) : 0.0));
    } else if (l.zero_stage == 0) {
      const double bucket = comm ? 4.0 * static_cast<double>(P) : 0.0;
      // Mixed precision: the compute-dtype gradient being added to the f32 one, and with
      // accumulation the slice of it converted at a time. The first stage folds its embedding
      // last, when the leaves are gone (Note [Leaf gradients]).
      const auto fold_of = [&](int64_t n) {
        return run.mixed() ? static_cast<double>(E * n) + (l.accum > 1 ? slice(n) : 0.0) : 0.0;
      };
      // The largest block parameter and the largest head parameter (the final norm, an untied head).
      int64_t block_max = 0, head_max = 0;
      for (size_t k = 0; k < s.numels.size(); ++k) {
        if (s.where[k] >= 0) block_max = std::max(block_max, s.numels[k]);
        else if (s.where[k] != CausalLM::kEmbedding) head_max = std::max(head_max, s.numels[k]);
      }
      const double leaves = leaf_gradients(s, l);
      double fold = leaves * unit;  // without mixed precision, the leaves alone
      if (run.mixed() && !s.first) {
        // A block's fold comes before its chunk's input gradient is made: one leaf fewer. The
        // head's comes first in a micro-batch's backward, beside only the leaf gradient still
        // going out (leaves_at_head, as for the tied copy's fold; tiny LLaMA bf16 with an untied
        // head, tp2 pp2 b4 m2: one (tokens, C), 512 KiB, over on the last stage before).
        fold = std::max({fold_of(block_max) + std::max(leaves - 1.0, 0.0) * unit, fold_of(head_max) + leaves_at_head,
                         leaves * unit});
      }
      if (run.mixed() && s.first) {
        // The embedding's tables are folded last, in model order; with one micro-batch the
        // masters of those after the one being folded do not exist yet (GPT-2's positions: its
        // (T, C) f32 over on every tiny bf16 layout without accumulation before).
        double embedding = 0.0, after = 0.0;
        for (size_t k = s.numels.size(); k-- > 0;) {
          if (s.where[k] != CausalLM::kEmbedding) continue;
          embedding = std::max(embedding, fold_of(s.numels[k]) - (l.accum == 1 ? 4.0 * after : 0.0));
          after += static_cast<double>(s.numels[k]);
        }
        // A block's fold comes before its block's input gradient is made, as on a later stage:
        // one leaf fewer (LoRA on a tiny LLaMA, bf16 ckpt=full b4 m2, r = 64 on down_proj: 9.4%
        // over with both; full fine-tuning's embedding fold hid it).
        fold = std::max({embedding, fold_of(head_max), fold_of(block_max) + std::max(leaves - 1.0, 0.0) * unit,
                         leaves * unit});
      }
      const double at_head = copy_fold > 0.0 ? 4.0 * static_cast<double>(masters_before_head(s, l, static_cast<int>(r)))
                                             : 4.0 * static_cast<double>(P);
      // Note [Leaf gradients]: one micro-batch (one stage, then), the first block's backward.
      double first_block = 0.0;
      if (l.accum == 1 && l.checkpointing != "none" && s.blocks > 0) {
        int64_t first = s.layers;  // the stage's first block with trained parameters
        for (int64_t w : s.where)
          if (w >= 0) first = std::min(first, w);
        int64_t later = 0;  // the elements whose gradients exist by then
        for (size_t k = 0; k < s.numels.size(); ++k)
          if (s.where[k] != CausalLM::kEmbedding && s.where[k] != first) later += s.numels[k];
        first_block = 4.0 * static_cast<double>(later) + rerun_leaves(s, l) * unit;
      }
      raise(MemoryCategory::kGradient, bucket + copy_grad +
                                           std::max({4.0 * static_cast<double>(P) + fold,
                                                     at_head + copy_fold + leaves_at_head, first_block}));
    } else if (l.zero_stage == 1) {
      // Note [Leaf gradients under ZeRO]: a block's gradient folded beside one leaf fewer.
      const double leaves = zero_leaves(s, l);
      int64_t block_max = 0;
      for (size_t k = 0; k < s.numels.size(); ++k)
        if (s.where[k] >= 0) block_max = std::max(block_max, s.numels[k]);
      raise(MemoryCategory::kGradient,
            4.0 * static_cast<double>(flat) + copy_grad +
                std::max({static_cast<double>(E * p_max), copy_fold, leaves * unit,
                          static_cast<double>(E * block_max) + std::max(leaves - 1.0, 0.0) * unit}));
    } else {
      raise(MemoryCategory::kGradient,
            4.0 * static_cast<double>(shard) + copy_grad +
                std::max(staged_peak(s, groups, owner, bucket_sizes, E, zero_leaves(s, l), unit), copy_fold));
    }

    // Optimizer state: AdamW's moments, and fp32 masters beside a bf16/fp16 model; on the NVMe
    // tier, the staging buffers they pass through instead (Note [The tier's memory and bytes]
    // in planner/nvme_tier.h).
    const int64_t state_elems = l.zero_stage == 0 ? P : shard;
    const double masters = run.mixed() || l.offload ? 4.0 : 0.0;
    const double state = l.nvme ? static_cast<double>(stage_tier(z, s.numels, run.nvme).staging_bytes)
                                : (8.0 + masters) * static_cast<double>(state_elems);
    if (offloaded) {
      // Note [ZeRO-Offload's memory]: and, under mixed precision, the masters rounded to the
      // compute dtype on their way to the device; ZeRO's shard also has the host's gradient shard.
      const double shard = static_cast<double>(state_elems);
      raise_host(MemoryCategory::kOptimizerState, state + (run.mixed() ? static_cast<double>(E) : 0.0) * shard);
      if (l.zero_stage > 0) raise_host(MemoryCategory::kGradient, 4.0 * shard);  // ZeRO's gradient shard
    } else {
      raise(MemoryCategory::kOptimizerState, state);
    }

    // ZeRO-3's gathered parts: the root through the whole forward, and two blocks; each
    // group's optimizer gathers its own (the parts' hooks are chained).
    if (l.zero_stage == 3) {
      int64_t gathered = 0;
      for (size_t g = 0; g < z.groups(); ++g) {
        std::vector<int64_t> sizes;
        for (size_t j = 0; j < groups.size(); ++j)
          if (owner[j] == g) sizes.push_back(bucket_sizes[j]);
        int64_t two = 0;
        for (size_t i = 1; i + 1 < sizes.size(); ++i) two = std::max(two, sizes[i] + sizes[i + 1]);
        if (sizes.size() == 2) two = sizes[1];
        gathered += sizes.front() + two;
      }
      raise(MemoryCategory::kGatheredParameter, static_cast<double>(E * gathered));
    }

    // Activations.
    const std::string& mode = l.checkpointing;
    // What one unit in flight (the stage's blocks, or under interleaving its largest chunk's)
    // keeps per token: dense and sparse blocks alike (planner/block_activations.h).
    double per_unit = 0.0, stage_bytes = 0.0;
    std::vector<double> chunk_bytes;
    for (const auto& [b, e] : s.chunks) {
      chunk_bytes.push_back(blocks_bytes_per_token(shapes, b, e, mode, l, E));
      per_unit = std::max(per_unit, chunk_bytes.back());
      stage_bytes += chunk_bytes.back();
    }
    if (l.virtual_stages == 1) per_unit = stage_bytes;
    const int64_t units = in_flight(l, r);
    // The blocks' saved tensors at the peak and at chunk 0's first backward (Note [Interleaved
    // chunks in flight]); without interleaving, in_flight's units of the whole stage.
    ChunksInFlight blocks_live{static_cast<double>(units) * per_unit, 0.0, static_cast<double>(units) * per_unit};
    double chunk0 = per_unit;  // what chunk 0 of one micro-batch keeps per token
    if (l.virtual_stages > 1) {
      blocks_live = chunks_in_flight(l, run.model.n_layer, r, chunk_bytes);
      chunk0 = chunk_bytes.front();
    } else if (s.first && l.pp > 1) {
      blocks_live.at_first_backward = static_cast<double>(in_flight_at_first_backward(l, run.model.n_layer)) * per_unit;
    }
    double act = static_cast<double>(tokens) * blocks_live.peak;
    act += 16.0 * static_cast<double>(l.micro_batch * T * l.accum);  // every micro-batch's ids and targets (int64)
    // Note [The vocabulary-parallel embedding's saved tensors]
    // Under tensor parallelism the embedding looks up local ids (int64) and masks the rows of
    // other ranks' ids (parallel/tp_styles.cc): the product keeps the looked-up rows (C in the
    // compute dtype) and the mask (one element), the lookup the local ids, per token of every
    // micro-batch whose chunk 0 has yet to run its backward. Per-rank allocator peaks of tiny
    // GPT-2 tp2 pp2 put the first stage under by exactly that (2 micro-batches x tokens x 1036
    // bytes, fp32, C = 256). Without a pipeline it had been hidden: the vocabulary-parallel
    // head's peak was counted with its input's gradient, which comes later, and the two
    // (tokens, C) terms cancelled (Note [The fused head's peak]).
    // A frozen embedding's lookup keeps nothing (Note [A frozen head and embedding]).
    if (s.first && l.tp > 1 && embedding_trains)
      act += static_cast<double>(chunk0_in_flight(l, run.model.n_layer) * tokens) *
             static_cast<double>(C * E + E + 8);
    if (!s.first) act += unit;  // receive buffer
    // A chunk's output waits for its backward (the next chunk's gradient comes back for it);
    // no block of this rank keeps it. Every unit in flight but the last chunk's (which runs
    // its backward at once, on the last rank).
    const int64_t outputs = l.pp == 1 ? 0 : s.last ? (l.virtual_stages > 1 ? units - 1 : 0) : units;
    act += static_cast<double>(outputs) * unit;
    // The head's dw, f32, and as the backward hands it on: f32, or cast to the compute dtype
    // (none for a frozen head: Note [A frozen head and embedding]).
    const double vc = head_trains ? 4.0 * static_cast<double>(head_rows * C) : 0.0;
    const double vc_e = head_trains ? static_cast<double>(head_rows * C * E) : 0.0;
    // Note [The recompute peak] (block_activations.cc): a block's backward, after what the forward kept.
    double blocks_backward = s.blocks == 0 ? 0.0
                                           : act + blocks_working_set(shapes, s.chunks, mode, l, E, tokens, run.widened_bf16) +
                                                 (tied && l.pp == 1 ? vc_e : 0.0);
    // Note [The embedding's backward in a pipeline]
    // On a pipeline's first stage the backward of chunk 0 ends in the embedding's, which makes
    // a dense gradient of each table (the vocabulary's rows here, in the parameters' dtype)
    // before autograd hands it to the parameter: the first time while the other micro-batches
    // of the warm-up are still in flight (the current one's blocks are freed by then; its
    // output and the gradient received for it are not). With GPT-2 tiny's 50257 x 256 table
    // (51 MB) that was this rank's activation peak in every pipeline layout measured, up to
    // 45 MB above the in-flight peak (per-rank allocator peaks). Also counted: a tied head's
    // gradient, received (f32) before the last micro-batch's backward, when only that
    // micro-batch is in flight. Without a pipeline, the head's stage counts these
    // (Note [The fused head's peak]).
    if (s.first && l.pp > 1) {
      const double unit_blocks = static_cast<double>(tokens) * chunk0;
      double tables = 0.0;
      for (size_t i = 0; i < shapes.parameters.size(); ++i) {
        const ParameterShape& p = shapes.parameters[i];
        if (table_trains[i] && p.shape.size() == 2)
          tables += static_cast<double>(E) * static_cast<double>(p.shape[0] == V ? head_rows * p.shape[1]
                                                                                : std::min(T, p.shape[0]) * p.shape[1]);
      }
      const double at_first = act - static_cast<double>(tokens) * (blocks_live.peak - blocks_live.at_first_backward) -
                              static_cast<double>(units - in_flight_at_first_backward(l, run.model.n_layer)) * unit;
      blocks_backward = std::max(blocks_backward, at_first - unit_blocks + unit + tables);
      if (tied_trains) {
        // Under ZeRO in fp32 the tied weight's own gradient was folded into ZeRO's buffers and
        // cleared, so the received one becomes it and stays through that backward, beside the
        // tables' (measured: dp2 pp2 zero1, 43 MB above the count without it); under mixed
        // precision it goes into the f32 gradients at once.
        const double last_only =
            act - (static_cast<double>(tokens) * blocks_live.peak - unit_blocks) - static_cast<double>(units - 1) * unit;
        const bool kept = l.zero_stage >= 1 && !run.mixed();
        blocks_backward = std::max(blocks_backward, last_only + vc);
        if (kept) blocks_backward = std::max(blocks_backward, last_only - unit_blocks + unit + vc + tables);
      }
    }
    if (s.last) {
      // The head runs after the last chunk's forward (Note [Interleaved chunks in flight]).
      const double blocks_peak = act;
      act -= static_cast<double>(tokens) * (blocks_live.peak - blocks_live.at_last_forward);
      // Note [The fused head's peak]
      double head = saved_bytes_per_token(shapes.head, "none", l, E);
      // The end of the backward: a tied head's dw, its scaled copy and the embedding's dense
      // gradient (this rank's vocabulary rows); untied or on a pipeline's last stage, two.
      double backward_end = (tied && l.pp == 1 ? 3.0 : 2.0) * vc_e;
      // With the embedding here, its other tables' gradients reduced over the batch (GPT-2's
      // positions: (T, C) f32) join them.
      if (s.first)
        for (size_t i = 0; i < shapes.parameters.size(); ++i) {
          const ParameterShape& p = shapes.parameters[i];
          if (table_trains[i] && p.shape.size() == 2 && p.shape[0] != V)
            backward_end += 4.0 * static_cast<double>(std::min(T, p.shape[0]) * p.shape[1]);
        }
      if (l.tp > 1) {
        // Vocabulary-parallel logits and their gradient, f32, and under mixed precision the
        // product's logits in the compute dtype beside them. The head input's gradient comes
        // after the logits' are gone (measured per rank: counting it put a tp2 pipeline's last
        // stage (tokens, C) over).
        const double kept = static_cast<double>(tokens) * head;
        head += (2.0 * 4.0 + (run.mixed() ? static_cast<double>(E) : 0.0)) * static_cast<double>(head_rows);
        double peak = std::max(act + static_cast<double>(tokens) * head, backward_end);
        // (oneDNN's scratchpad in the logits GEMM, Note [oneDNN's scratchpad], is at most 4 bytes
        // per logit, under the f32 logits and gradient that come after it.)
        if (run.widened_bf16) {
          // Note [Widened head GEMMs]: the head's weight gradient, the logits' gradient (tokens,
          // rows) transposed times the input; beside it the logits' gradient, dx and dw in the
          // compute dtype (measured, tiny GPT-2 bf16 tp2 pp2 b1 m8 on a Zen 3: 13 MB above the
          // logits' moment, now within 1 KB).
          const double hr = static_cast<double>(head_rows), n = static_cast<double>(tokens), c = static_cast<double>(C);
          peak = std::max(peak, act + kept + static_cast<double>(E) * (n * hr + n * c + hr * c) +
                                    4.0 * (hr * c + hr * n + n * c));
        }
        act = peak;
      } else {
        head += static_cast<double>(C * E);  // dx, of the head's input, beside the chunk's logits
        const double rows = static_cast<double>(std::min(ops::linear_cross_entropy_chunk_rows(V, run.on_device), tokens));
        // Note [Widened head GEMMs]
        // On a CPU without native bf16 dot products a bf16 GEMM widens both operands to f32
        // scratch and, for a bf16 output, makes its f32 product there first (matmul.cc's
        // gemm_widened): in the fused head's logits GEMM the chunk's rows (rows, C), the
        // weight (V, C) and the product (rows, V), beside the chunk's bf16 logits. The scratch
        // is freed when the GEMM returns. Found by an allocator trace on a Zen 3 (tiny GPT-2
        // bf16 pp2 b2 m4: 77 MB above the count that had the product's scratch missing and
        // all of it at the backward's start; the rows = C = 256 case had hidden both).
        const double widened = run.widened_bf16 ? 4.0 * static_cast<double>(V * C) + 4.0 * rows * static_cast<double>(C + V) : 0.0;
        // Note [Padded logits] (ops/loss.cc): on a GPU the chunk's logits and the forward's dw
        // have the padded vocabulary's rows, beside a zero-padded copy of the weight that the
        // vocabulary GEMMs read (measured on an H200, GPT-2 small bf16 b4 m1: 49 MiB of
        // activations above the count without them).
        const int64_t padded = ops::linear_cross_entropy_padded_vocabulary(V, run.on_device);
        const double dw = head_trains ? 4.0 * static_cast<double>(padded * C) : 0.0;
        const double weight_copy = padded != V ? static_cast<double>(padded * C * E) : 0.0;
        const double forward = act + static_cast<double>(tokens) * head + dw + rows * static_cast<double>(padded * E) +
                               widened + weight_copy + logits_gemm_scratch(run, static_cast<int64_t>(rows), V, C, V);
        // The backward's start, everything the forward kept still alive: the forward's dw, its
        // scaled copy and, under mixed precision, that cast to the compute dtype.
        const double backward_start =
            act + static_cast<double>(tokens) * head + dw + vc + (run.mixed() ? vc_e : 0.0);
        act = std::max({forward, backward_start, backward_end});
      }
      act = std::max(act, blocks_peak);
    }
    raise(MemoryCategory::kActivation, std::max(act, blocks_backward));
  }
  // Another framework's gradient buffers: the trainer's structure at its bytes per element
  // (Note [Framework conventions] in planner/convention.h).
  if (run.convention.grad_buffer_bytes != 4.0) {
    const double scale = run.convention.grad_buffer_bytes / 4.0;
    const auto g = static_cast<size_t>(MemoryCategory::kGradient);
    const auto scaled = [&](int64_t b) { return static_cast<int64_t>(std::llround(scale * static_cast<double>(b))); };
    out.peak_bytes[g] = scaled(out.peak_bytes[g]);
    out.host_peak_bytes[g] = scaled(out.host_peak_bytes[g]);
    for (auto& stage : out.stage_peak_bytes) stage[g] = scaled(stage[g]);
  }
  return out;
}

}  // namespace trident::planner
