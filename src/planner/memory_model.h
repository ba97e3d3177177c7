// Predicted peak bytes per rank, per allocator category (core/allocator.h), of a layout's
// training step: the same arithmetic the caching allocator's categories measure, so that
// planner/measure.h's measurements check it category by category (tests/planner).
//
// Note [The memory model]
// Per pipeline stage (the largest stage's value is the rank's), with P this rank's trained
// parameters (after tensor, pipeline and expert parallelism), E the compute dtype's bytes and dp
// ranks to shard over (dense parameters: dp x ep; the experts expert parallelism places: dp,
// in buffers of their own: Note [The planner's mixture of experts] in block_activations.cc):
//  parameter       E P; ZeRO 1-2 the flat buffer (buckets padded to dp); ZeRO-3 its 1/dp shard;
//                  the last stage's copy of a tied head; frozen parameters whole, in E bytes or
//                  NF4's (Note [The planner's fine-tuning] in planner/fine_tuning.h).
//  gradient        one process: 4 P (autograd's gradients, fp32 masters' under mixed
//                  precision). Data parallel: + 4 P for the buckets (the gradients exist twice
//                  until the all-reduce makes them views). ZeRO-1: the flat fp32 buffer plus the
//                  largest parameter's own gradient, folded in and freed one at a time; ZeRO
//                  2-3: the 1/dp shard plus the staged buckets at their peak (Note [Staged
//                  buckets]: two adjacent ones, ZeRO-3's root part, the gradient being folded).
//                  ZeRO-Offload: Note [ZeRO-Offload's memory] (memory_model.cc).
//  optimizer_state AdamW's two moments, 8 P (ZeRO: 8 P / dp), + fp32 masters 4 P under mixed precision;
//                  on the host under ZeRO-Offload (Note [ZeRO-Offload's memory]); on the NVMe
//                  tier only its staging buffers (Note [The tier's memory and bytes] in
//                  planner/nvme_tier.h).
//  gathered        ZeRO-3: the root part (embeddings, final norm, head: gathered through the whole
//                  forward) and two blocks (the one running and the one prefetched).
//  activation      what the in-flight micro-batches keep (the family's SavedActivation lists per
//                  checkpointing mode, a mixture of experts' sparse blocks with their routed
//                  rows; 1F1B keeps min(p - r, m) on stage r), the token ids of
//                  the step's micro-batches, a pipeline stage's receive buffer, and the head's
//                  peak (Note [The fused head's peak]).
//
// Note [The fused head's peak]
// The fused LM head + loss (ops/loss.h) computes its gradients in the forward: the peak is
// there, with every saved activation, its (V, C) fp32 dw, one chunk of logits (min(rows, R) x V
// in the compute dtype, R from Note [Head chunks]) and dx; or at the backward's start, where
// everything the forward kept meets the dw's scaled copy (and under mixed precision that copy
// cast to the compute dtype); or at the end of the backward, when a tied head's dw, its scaled
// copy and the embedding's dense gradient are all alive (3 (V, C) in the compute dtype, with
// GPT-2's (T, C) position gradient; untied, or on a pipeline's last stage without the
// embedding, 2), whichever is largest.
// A vocabulary-parallel loss (tp > 1) keeps its logits and their gradient, 2 (tokens, V / tp)
// fp32, instead of the forward's dw and chunk, and peaks there, before its input's gradient is
// made (measured per rank); its backward's end holds the same buffers for this rank's V / tp
// rows.
//
// The rank's total is the sum of the categories' peaks: an upper bound (the gradients peak after
// the activations' peak has gone), so a layout that fits by it fits.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "planner/layout.h"
#include "planner/run_spec.h"

namespace trident::planner {

struct MemoryEstimate {
  std::array<int64_t, kNumMemoryCategories> peak_bytes{};  // by MemoryCategory, the largest over the stages
  // Each pipeline stage's (every rank of a stage has the same: rank = (stage * dp + dp rank) * tp
  // + tp rank, parallel/mesh.h).
  std::vector<std::array<int64_t, kNumMemoryCategories>> stage_peak_bytes;
  // ZeRO-Offload on a device (Note [ZeRO-Offload's memory]): what each rank keeps in its host's
  // memory instead, by category, the largest over the stages. Zero otherwise: the host's own
  // use beside a device is not modelled, and on CPU ranks offload moves nothing.
  std::array<int64_t, kNumMemoryCategories> host_peak_bytes{};
  int64_t total() const;  // the device's (or the CPU rank's) bytes
  int64_t host_total() const;
  int64_t category(MemoryCategory c) const { return peak_bytes[static_cast<size_t>(c)]; }
};

// `communicator`: the ranks run under mpirun (data parallelism exists even with one rank);
// false only for one process started alone.
MemoryEstimate predict_memory(const RunSpec& run, const Layout& layout, bool communicator);

}  // namespace trident::planner
