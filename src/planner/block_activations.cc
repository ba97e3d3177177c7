#include "planner/block_activations.h"

#include <algorithm>

namespace trident::planner {
namespace {

using models::ModelShapes;
using models::SavedActivation;

// The ranks sharing a saved activation: tensor parallelism's split ones, and under sequence
// parallelism every one but those kept gathered.
double split_of(const SavedActivation& a, const Layout& l) {
  if (a.tp_split && a.split_heads > 0) return static_cast<double>(std::min(l.tp, a.split_heads));
  return a.tp_split || (l.sequence_parallel && !a.sp_gathered) ? static_cast<double>(l.tp) : 1.0;
}

// The share of a mixture of experts' k routed rows per token that a rank keeps: all of them
// dropless, at most the capacity factor's share under one below 1 (each expert keeps at most
// capacity_factor x N k / E rows of its N tokens' choices; under expert parallelism a rank's
// experts receive at most as many from each rank). Note [The planner's mixture of experts].
double routed_share(const ModelShapes& shapes) {
  return shapes.capacity_factor > 0.0 ? std::min(1.0, shapes.capacity_factor) : 1.0;
}

// Bytes per token of one saved activation (`routed`: routed_share()).
double entry_bytes(const SavedActivation& a, int64_t E, double routed) {
  const double bytes = static_cast<double>(a.per_token * (a.i64 ? 8 : a.f32 ? 4 : E));
  return a.routed ? bytes * routed : bytes;
}

}  // namespace

double saved_bytes_per_token(const std::vector<SavedActivation>& list, const std::string& mode, const Layout& l,
                             int64_t E, double routed) {
  double bytes = 0.0;
  for (size_t i = 0; i < list.size(); ++i) {
    const SavedActivation& a = list[i];
    const bool kept = mode == "full" ? i == 0 : mode == "selective" ? a.kept_selective : a.kept_none;
    if (!kept) continue;
    bytes += entry_bytes(a, E, routed) / split_of(a, l);
  }
  return bytes;
}

namespace {

// Note [The planner's mixture of experts]
// A sparse block keeps its list (ModelShapes::sparse_block, read from moe::SparseMoe's ops and
// their derivatives: autograd/derivatives/moe.cc, swiglu.cc, softmax.cc, elementwise.cc) with
// its routed rows at k per token: dropless routing makes N k rows of a micro-batch's N tokens
// when every expert is here (ep = 1), whatever the routing.
// Under expert parallelism the rows a rank's experts process depend on the routing (the rows
// every ep rank sends to its experts): the model predicts balanced routing, N k rows per rank,
// the mean, and adds the arrived rows' int64 order (kept by their gather and scatter). A
// router that sends a rank more than its share makes that rank's activations larger, up to
// ep times the routed rows' part. How far that is from balanced on the tiny Mixtral of
// tests/planner_mpi (untrained: its busiest expert takes 33% of the choices, not 25%), without
// checkpointing, dropless: the activations 2.7-3.0% (ep2 b4 m1, b2 m2 in the bench), 5.7% (ep4
// b4 m1), 6.4% (ep2 b2 m2) and 9.5% (ep2 b1 m4: the peak over four micro-batches of 256
// tokens' routings) above the prediction (bench/plan_accuracy_bench --config tiny-moe, 2
// ranks, every ep2 layout); with selective or full checkpointing the routed rows are not kept
// and every layout was within 0.2%.
// A capacity factor c below 1 (model.moe_capacity_factor, training only) caps each expert at
// c N k / E rows of each rank's tokens, so a rank keeps at most c N k rows, and exactly that
// once every expert is full, whatever the routing: the prediction (routed_share) is then an
// upper bound, met on the tiny runs with c = 0.5 (within 0.4%, every category, 1-4 ranks).
// The backward's working set (Note [The recompute peak]) is the dense block's, over the sparse
// list; its weight gradient is the grouped product's, every local expert's at once (E / ep of
// them, f32).
// Model state: each ep rank holds its E / ep experts and every dense parameter; expert
// parallelism puts the experts' gradients and state in a ZeRO group of their own over dp (one
// ZeroOptimizer per reduction group, parallel/parallelize.cc), with its own buckets, padding,
// staged buckets and ZeRO-3 parts.
double sparse_ep_bytes_per_token(const ModelShapes& shapes, const std::string& mode, const Layout& l) {
  return l.ep > 1 && mode == "none" ? 8.0 * static_cast<double>(shapes.experts_per_token) * routed_share(shapes) : 0.0;
}

}  // namespace

double blocks_bytes_per_token(const ModelShapes& shapes, int64_t begin, int64_t end, const std::string& mode,
                              const Layout& l, int64_t E) {
  const double dense = saved_bytes_per_token(shapes.block, mode, l, E);
  const double sparse = shapes.sparse_blocks == 0 ? 0.0
                                                  : saved_bytes_per_token(shapes.sparse_block, mode, l, E,
                                                                          routed_share(shapes)) +
                                                        sparse_ep_bytes_per_token(shapes, mode, l);
  double bytes = 0.0;
  for (int64_t b = begin; b < end; ++b) bytes += shapes.is_sparse(b) ? sparse : dense;
  return bytes;
}

namespace {

// Note [The recompute peak]
// Under activation checkpointing a block's backward first reruns its forward (autograd/
// derivatives/activation_checkpoint.cc): what "none" keeps and the mode did not comes back,
// beside everything the forward kept. The peak is in the backward of the block's first matrix
// product pair (GPT-2's MLP, measured on 124M): besides those, the incoming gradient, the rerun's
// output, the gradient of the largest kept tensor, the gradient of the block's input width
// and the largest weight's f32 gradient (made in the activation category, then handed to the
// parameter); a tied head's scaled dw waits for the embedding's through the whole backward.
// Under "selective" the rerun takes the first run's matrix products back, and the region drops
// its list of them before the backward (autograd/derivatives/activation_checkpoint.cc): those
// the backward does not read (kept by "selective", not by "none": LLaMA's q and k before RoPE,
// both families' products that feed a residual add) are freed then, so the block being
// back-propagated holds them no more. Counting them put pp4's middle stages (one block each)
// 5-12% over (per-rank allocator peaks, tiny GPT-2 and LLaMA, fp32).
// Under tensor parallelism the products are dropped too, and the peak is one of three moments
// (allocator traces of tiny LLaMA and GPT-2 tp2 pipelines' first stages, fp32 and bf16; the
// first two also without checkpointing):
//  * the backward of the block's last product (row-parallel: LLaMA's down_proj), with no
//    input-width gradient yet; under sequence parallelism the incoming gradient is there
//    twice, split and gathered whole. The peak where a widened weight-gradient GEMM's scratch
//    is large (bf16 on CPUs without native bf16).
//  * the backward of the first product, with the input-width gradient, as without tensor
//    parallelism, beside an f32 weight gradient of the block (counted as the largest's) but no
//    widened scratch (GPT-2's MLP in fp32).
//  * the rerun's end, before anything is dropped (below).
// Counted as one moment with the dropped products kept, tiny LLaMA bf16 tp2 pp2 b4 m2 first
// stages were 8.6% (tp2) and 5.8% (tp2+sp) over with "selective" and 1.8% over / 1.0% under with
// "none"; GPT-2 fp32 tp2 pp2x2 b4 m2 4.9% over. Now within 0.7%
// (bench/results/2026-11-28-planner-tp-recompute-zen3). Without tensor parallelism the one
// moment, widened scratch and input-width gradient together, was measured exact (pp4's middle
// stages in bf16) and is left as it was.
// Sequence parallelism splits the block-width tensors, tensor parallelism the split ones.
// Without checkpointing the same backward has nothing to rerun and no rerun output; it is the
// peak of a pipeline's first stages, which keep several micro-batches and no head (GPT-2 124M
// pp4 b1 m4 and pp2 b2 m2: 28 and 47 MB above the kept activations, measured).
// `list` and `matmuls`: a dense block's or a sparse one's (with `grouped`, the elements of
// its grouped products' weight gradient: Note [The planner's mixture of experts]).
double backward_working_set(const std::vector<SavedActivation>& list,
                            const std::vector<std::pair<int64_t, int64_t>>& matmuls, int64_t grouped,
                            const std::string& mode, const Layout& l, int64_t E, int64_t tokens, bool widened,
                            double routed = 1.0) {
  const double tp = static_cast<double>(l.tp);
  double rerun = 0.0, dropped = 0.0, largest = 0.0;
  for (size_t i = 0; i < list.size(); ++i) {
    const SavedActivation& a = list[i];
    const double bytes = entry_bytes(a, E, routed) / split_of(a, l);
    const bool kept = mode == "full" ? i == 0 : mode == "selective" ? a.kept_selective : a.kept_none;
    if (a.kept_none && !kept) rerun += bytes;
    if (mode == "selective" && a.kept_selective && !a.kept_none) dropped += bytes;
    if (a.kept_none) largest = std::max(largest, bytes);
  }
  const double whole = static_cast<double>(list.front().per_token * E);
  const double width = whole / (l.sequence_parallel ? tp : 1.0);
  // The incoming gradient and, when a rerun made one, its output; then with the input-width
  // gradient (the first product's backward) or without it (the last product's, tensor parallel).
  const double rerun_output = mode == "none" ? 0.0 : 1.0;
  const double with_input = rerun - dropped + largest + (2.0 + rerun_output) * width;
  const double gathered = l.sequence_parallel ? whole : 0.0;  // the incoming gradient, gathered
  const double without_input = rerun - dropped + largest + (1.0 + rerun_output) * width + gathered;
  // Under tensor parallelism the rerun's end can be higher: nothing dropped yet, and beside
  // the incoming gradient the last row-parallel product's output reduced again (its all-reduce
  // or reduce-scatter is not a product the rerun takes back) with the rerun's output, or under
  // sequence parallelism inside its reduce-scatter: the product's whole copy, the scattered
  // output and the norm's split output before it.
  const double rerun_end = l.tp > 1 && mode != "none" ? rerun + 3.0 * width + gathered : 0.0;
  double weight = 4.0 * static_cast<double>(grouped), weight_f32 = weight;
  for (const auto& [k, n] : matmuls) {
    double w = 4.0 * static_cast<double>(k * n) / tp;
    weight_f32 = std::max(weight_f32, w);
    // Under widened bf16 GEMMs (Note [Widened head GEMMs]) the weight's gradient GEMM also
    // holds its bf16 output and f32 copies of both operands, (tokens, in) and (tokens, out),
    // the larger split by tensor parallelism (measured: tiny GPT-2 bf16 pp4 on a Zen 3, a
    // middle stage 1.75 MB above the count without them at 256 tokens, 3 MB at 512: exactly
    // these terms).
    if (widened)
      w += static_cast<double>(E * k * n) / tp +
           4.0 * static_cast<double>(tokens) * (static_cast<double>(std::max(k, n)) / tp + static_cast<double>(std::min(k, n)));
    weight = std::max(weight, w);
  }
  const double t = static_cast<double>(tokens);
  if (l.tp == 1) return t * with_input + weight;
  return std::max({t * without_input + weight, t * with_input + weight_f32, t * rerun_end});
}

}  // namespace

double blocks_working_set(const ModelShapes& shapes, const std::vector<std::pair<int64_t, int64_t>>& chunks,
                          const std::string& mode, const Layout& l, int64_t E, int64_t tokens, bool widened) {
  bool dense = false, sparse = false;
  for (const auto& [b, e] : chunks)
    for (int64_t i = b; i < e; ++i) (shapes.is_sparse(i) ? sparse : dense) = true;
  double most = 0.0;
  if (dense) most = backward_working_set(shapes.block, shapes.block_matmuls, 0, mode, l, E, tokens, widened);
  if (sparse) {
    int64_t grouped = 0;  // every local expert's weight of one product
    if (!shapes.expert_matmuls.empty())
      grouped = shapes.experts / l.ep * shapes.expert_matmuls.front().first * shapes.expert_matmuls.front().second;
    most = std::max(most, backward_working_set(shapes.sparse_block, shapes.sparse_block_matmuls, grouped, mode, l, E,
                                               tokens, widened, routed_share(shapes)));
  }
  return most;
}

}  // namespace trident::planner
