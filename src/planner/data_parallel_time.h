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
// gradients, beside part i's reduce-scatter: part i-1's backward waits for that gather with no
// compute to hide it. The two collectives share the links, so the gather ends once it has had
// its share of them: after twice its own time while the reduce-scatter is at least as long
// (fp32 gradients against bf16 parameters: twice the bytes), after gather + reduce-scatter
// otherwise. What is left of the reduce-scatter then hides behind part i-1's backward.
// Against llm-foundry's H100 tables (bench/results/2026-12-02-plan-published-h100), the rows
// that differ only in micro-batch and checkpointing rank as measured with this exposure and
// not with everything hidden: MPT-13B's two micro-batches without checkpointing, whose
// traffic is half their compute, ran slower per GPU than sixteen with it.
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
