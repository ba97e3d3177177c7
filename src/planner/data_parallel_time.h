// Data-parallel and ZeRO traffic in a step, and the part of it compute does not hide: which
// collectives each ZeRO stage runs, in which phase of which micro-batch, and what overlaps.
//
// Note [Overlapped data-parallel traffic]
// Per ZeRO stage, as the trainer runs it (and the frameworks, Note [Framework conventions]):
//  0  an all-reduce of the gradients in the last micro-batch's backward (the earlier ones
//     accumulate, as DDP under no_sync);
//  1  a reduce-scatter of them there, and after the step an all-gather of the updated
//     parameters in the compute dtype (zero/replicated_parameters.h), which nothing hides;
//  2  a reduce-scatter in every micro-batch's backward (zero/staged_gradients.h), and the
//     same all-gather after the step;
//  3  per micro-batch, an all-gather of every part in the forward and again in the backward
//     (zero/sharded_parameters.h, prefetching the next part's), and the gradients'
//     reduce-scatter in the backward.
// A collective issued bucket by bucket (or part by part) inside a phase of compute c hides
// behind it at the overlap fraction f, all but the last bucket's (the first part's, for a
// prefetched gather): exposed = max(comm / buckets, comm - f c (buckets - 1) / buckets).
// f is the cluster file's comm_overlap where the convention overlaps that collective (NCCL
// on its own stream: near 1; CPU ranks, whose MPI progresses only inside calls: 0), else 0.
// More micro-batches add no hiding to stages 0-1: only the last backward carries their traffic.
//
// Note [Gathers after the gradients]
// FSDP1 under backward_prefetch = BACKWARD_POST (Composer's default; convention "composer")
// issues the backward's all-gather of part i-1 in part i's post-backward hook, after part i's
// gradients and before part i's reduce-scatter: part i-1's backward waits for that gather, with
// no compute to hide it. Both collectives go through the process group's one NCCL stream, so
// they run in the order issued: the gather whole, then the reduce-scatter, which hides behind
// part i-1's backward as fsdp's does (what it does not hide delays the next gather as much).
// Against llm-foundry's H100 tables (bench/results/2026-12-02-plan-published-h100), MPT-7B
// without checkpointing ran 9% slower per GPU on 512 GPUs than on 8, whose gathers stay inside
// a node; with everything hidden the planner ranked the 512-GPU row first (measured 5th).
#pragma once

#include <cstdint>

#include "planner/convention.h"

namespace trident::planner {

// One data-parallel group's collectives, each over the whole stage's buffer.
struct DataParallelCollectives {
  double reduce_s = 0.0;  // the gradients' all-reduce (stage 0) or reduce-scatter (1-3)
  double gather_s = 0.0;  // an all-gather of the parameters in the compute dtype (stages 1-3)
};

// One micro-batch on the slowest stage, and how its traffic is cut.
struct MicroBatchPhases {
  double forward_s = 0.0;
  double backward_s = 0.0;  // recomputation included
  double micro_batches = 1.0;
  double grad_buckets = 1.0;  // the gradients' buckets
  double parts = 1.0;         // ZeRO-3's gathered parts (the stage's blocks and its root)
};

struct DataParallelTime {
  double total_s = 0.0;
  double exposed_s = 0.0;
};

// What a collective of `comm_s` issued in `buckets` pieces through `compute_s` of compute at
// overlap fraction `overlap` leaves exposed.
double exposed_behind(double comm_s, double compute_s, double buckets, double overlap);

DataParallelTime data_parallel_time(int zero_stage, const DataParallelCollectives& c, const MicroBatchPhases& p,
                                    const Convention& convention, double comm_overlap);

}  // namespace trident::planner
