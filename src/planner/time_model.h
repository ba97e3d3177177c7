// Predicted step time of a layout on a cluster (planner/cluster.h): compute from per-op FLOPs
// and bytes at the cluster's rates, communication by the alpha-beta model of each collective,
// the part of it each strategy cannot hide, and the pipeline's bubble.
//
// Note [The time model]
// Per micro-batch on the slowest pipeline stage:
//  matmuls    3 x 2 x in x out FLOPs per token (forward, and the backward's two products), at
//             the GEMM rate of the compute dtype at the micro-batch's rows (gemm_half_rows) and
//             the forward's and dx's reduction lengths on the rank (gemm_half_k: Note [GEMMs by
//             shape] in gemm_time.h); the head's (C, V) on the last stage.
//  attention  causal: 2 T C FLOPs per token forward (QK^T and PV, half of them masked), 2.5x
//             that backward, at attention_efficiency x the GEMM rate x d / (d +
//             attention_half_head_size) for head size d (Note [Attention by head size] in
//             calibrate.cc).
//  memory     the bytes the norms, activations, residuals and softmax move: 3x (written
//             forward, read and written backward) the block's saved activations, at
//             memory_bandwidth_gbs; on the first stage the token embedding's dense (V, C)
//             gradient (Note [The embedding's dense gradient] in time_model.cc).
//  recompute  "full": the blocks' forward again; "selective": the attention and the memory-bound
//             ops again (Note [Activation checkpointing]).
//  head       its product forward and the two backward at the GEMM rate (with tp = 1 at the
//             rows of the fused loss's chunks, Note [Head chunks] in ops/loss.cc); with tp = 1 the fused
//             loss's exps per logit (fused_loss_ns_per_logit) and its f32 dw's passes (Note [The
//             fused loss's time]), with tp > 1 the vocabulary-parallel loss's passes.
//  fold       under mixed precision, each micro-batch's gradients folded into the f32 ones.
//  experts    a mixture of experts' sparse blocks: k routed rows per token through one expert's
//             products, GEMMs of the rows routed to each expert, and under expert parallelism
//             the rows' all_to_all_v (Note [The time of a mixture of experts] in time_model.cc),
//             each layer's waiting for its busiest ep rank where a run's routing is given (Note
//             [Measured expert load] in expert_load.h).
// Per step: m micro-batches, the optimizer (AdamW reads and writes 36 bytes per parameter it
// steps, masters and moments included; ZeRO steps 1/dp of them: the dense ones over dp x ep,
// the experts over dp, each group reduced over its own ranks), and
//  data parallel  the gradients reduced at the convention's bytes per element (fp32 as the
//                 trainer keeps them, bf16 under grad_compression = "bf16"; Note [Framework
//                 conventions] in convention.h): a ring inside a node (2 (n-1)/n bytes / bw + 2
//                 (n-1) latency), hierarchical across nodes (Note [Collectives across nodes] in
//                 collectives.h). ZeRO 0-1 reduce in the last micro-batch, 2-3 in every one;
//                 ZeRO 1-2 all-gather the stepped parameters after the step, ZeRO-3 every part
//                 in each micro-batch's forward and backward. Each hides behind the compute it
//                 is issued beside, bucket by bucket, at comm_overlap where the convention
//                 overlaps it (Note [Overlapped data-parallel traffic] in data_parallel_time.h).
//  tensor parallel  4 all-reduces of a micro-batch's (tokens, C) per block (two forward, two
//                 backward; sequence parallelism's reduce-scatter + all-gather cost the same),
//                 6 under checkpointing (the rerun repeats the forward's), the embedding's and
//                 the head input's, the vocabulary-parallel loss's two small ones, all exposed;
//                 that loss's local passes over its (tokens, V / tp) f32 logits cost
//                 vocab_loss_ns_per_logit (calibrated; Note [The vocabulary-parallel loss's time]).
//  pipeline   the schedule run op by op (Note [Simulated pipeline], pipeline_sim.h) with each
//             chunk's forward and backward: the bubble is its step less m x the slowest
//             stage's micro-batch (with equal stages 1F1B's (p - 1) / (m + p - 1) of the step,
//             interleaved's (p - 1) / (v m + p - 1)); the exposed messages what a send and a
//             receive of (tokens, C) per micro-batch and chunk boundary, each way (1/tp of it
//             per rank across nodes under Megatron's scatter/gather), and a tied head's weight
//             and gradient, add to it.
//  NVMe tier  the optimizer state's reads and writes at the cluster's disk rates, the node's
//             ranks sharing the disk, all but what AdamW's units hide (Note [The tier's step
//             time] in planner/nvme_tier.cc).
#pragma once

#include <string>

#include "planner/cluster.h"
#include "planner/collectives.h"
#include "planner/layout.h"
#include "planner/nvme_tier.h"
#include "planner/run_spec.h"

namespace trident::planner {

// The slowest stage's compute per step by what runs it (they add up to TimeEstimate::compute_s),
// named as train.profile_step's rows group them: `plan --explain` prints them, and
// bench/plan_vs_profile.py sets them beside a profiled step's.
struct ComputeParts {
  double products = 0.0;    // the blocks' matrix products (attention's projections, dense MLPs, routers), forward and backward
  double experts = 0.0;     // a mixture's grouped expert products
  double attention = 0.0;   // the attention kernel, forward and backward
  double memory = 0.0;      // the memory-bound ops: norms, activations, residuals, rope
  double adapters = 0.0;    // LoRA's factors and their scaling and adding
  double head = 0.0;        // the head's products
  double loss = 0.0;        // the loss's passes over the logits, and the head's dw passes
  double recompute = 0.0;   // activation checkpointing's rerun
  double optimizer = 0.0;   // AdamW (and ZeRO-Offload's traffic to the host)
  double accumulate = 0.0;  // the micro-batches' gradients added (or folded into f32), and copied into ZeRO-0's buckets
  double total() const {
    return products + experts + attention + memory + adapters + head + loss + recompute + optimizer + accumulate;
  }
};

struct TimeEstimate {
  double compute_s = 0.0;         // the slowest stage's forward, backward, recompute and optimizer
  double exposed_comm_s = 0.0;    // collectives not hidden behind compute
  double bubble_s = 0.0;          // pipeline idle time
  double exposed_disk_s = 0.0;    // the NVMe tier's disk time not hidden behind the optimizer
  double step_s() const { return compute_s + exposed_comm_s + bubble_s + exposed_disk_s; }
  DiskTraffic disk;               // the NVMe tier's bytes per rank and step (the slowest stage's)
  double disk_s = 0.0;            // the disk's time for them, hidden or not
  double recompute_s = 0.0;       // of compute_s: what checkpointing adds
  ComputeParts parts;             // compute_s by what runs it
  double dp_exposed_s = 0.0;      // of exposed_comm_s: data parallelism's and ZeRO's
  double tp_s = 0.0, ep_s = 0.0;  // of it: tensor parallelism's all-reduces, expert parallelism's exchanges
  double skew_s = 0.0;  // of it: their waits for the slowest rank (Note [The ranks' skew at a
                        // blocking collective])
  double pp_exposed_s = 0.0;      // of it: the pipeline's messages
  double comm_total_s = 0.0;      // every collective, hidden or not
  double model_flops = 0.0;       // the step's model FLOPs on all ranks (6 N T + attention, no recompute)
  double hardware_flops = 0.0;    // with recomputation
};

TimeEstimate predict_time(const RunSpec& run, const Layout& layout, const Cluster& cluster);

}  // namespace trident::planner
