// What a framework does where frameworks differ, for planning a run as that framework would
// run it: the dtype of its gradient buffers and of the gradients it reduces, which of its
// data-parallel collectives it overlaps with compute, when it reduces under gradient
// accumulation, and how it sends pipeline messages. `trident plan --convention NAME`.
//
// Note [Framework conventions]
// The planner's own arithmetic is the trainer's ("trident"). The others are the frameworks'
// defaults for a mixed-precision run, as their documentation and code state them:
//  megatron   Megatron-LM / Megatron-Core: gradients accumulated and all-reduced in fp32 under
//             bf16 (accumulate_allreduce_grads_in_fp32 is forced on), in the compute dtype
//             under fp16; overlap_grad_reduce off (as SC'21's runs), so data-parallel traffic
//             is exposed; the distributed optimizer reduces once, in the last micro-batch;
//             scatter_gather_tensors_in_pipeline on: across nodes a stage sends 1/tp of its
//             activation from each tensor-parallel rank and the receivers all-gather it over
//             NVLink (with sequence parallelism the message is split already).
//  fsdp       PyTorch FSDP as torchtitan runs it (MixedPrecisionPolicy: bf16 parameters,
//             reduce_dtype float32): fp32 gradients of the fp32 shards, reduced in fp32, every
//             collective on its own stream and overlapped (forward prefetch, backward
//             prefetch, reduce-scatter behind the next part's backward), reduce-scatter in
//             every micro-batch under accumulation (FSDP2's default). Its fp32 shard is the
//             parameter: the compute dtype's copy exists only gathered (no compute-dtype
//             shard beside the masters, as the trainer's and DeepSpeed's ZeRO-3 keep).
//  composer   PyTorch FSDP (FullyShardedDataParallel, "FSDP1") as MosaicML's Composer runs it
//             (llm-foundry's MPT tables): fsdp's dtypes and memory, with Composer's default
//             backward_prefetch = BACKWARD_POST, which issues the backward's all-gather of the
//             next part only after the current part's gradients are computed: that gather has no
//             compute to hide behind (Note [Gathers after the gradients] in
//             planner/data_parallel_time.h). PyTorch's own default (BACKWARD_PRE, Hugging Face
//             Accelerate's too) is fsdp's.
//  deepspeed  DeepSpeed ZeRO: gradients in the compute dtype, reduced in it
//             (communication_data_type defaults to the model's dtype); overlap_comm off for
//             stages 0-2 and on for stage 3 (its config's default); stage 2-3 reduce every
//             micro-batch, stage 0-1 at the accumulation boundary.
// The attention kernel is the framework's too: every convention's default is a fused (flash)
// kernel, as trident's own and today's frameworks run; `plan --attention unfused` prices one
// whose scores go through memory (Note [Unfused attention] in planner/cluster.cc).
// Note [Gradient passes a micro-batch]
// Each micro-batch's backward ends in memory-bound passes over all of a stage's gradients (in
// FSDP2 over its gathered parameters too). Per parameter, E the compute dtype's bytes and R the
// reduction's (bf16 compute, fp32 reduce: E = 2, R = 4):
//  trident, megatron, deepspeed, and fsdp and composer where the gradients are not sharded
//            (ZeRO 0-1): the trainer's fold into fp32 under mixed precision (read E, read and
//            write 4), or in fp32 the gradients added into their sum after the first
//            micro-batch (12).
//  composer  FSDP1 sharded (use_orig_params; torch/distributed/fsdp/_runtime_utils.py,
//            _post_backward_hook and _reduce_grad): the views' gradients concatenated into the
//            flat parameter's (autograd's split backward: read and write E), cast to
//            reduce_dtype where it differs (read E, write R), and divided in place by the
//            gradient predivide factor, > 1 on 2 ranks or more (read and write R): 18 bytes.
//            FSDP1 gathers straight into the flat parameter, whose views the forward uses.
//  fsdp      FSDP2 (torch/distributed/_composable/fsdp/_fsdp_collectives.py): the gradients
//            copied into the reduce-scatter's input with the cast (_chunk_cat: read E, write R)
//            and averaged by the reduce-scatter itself (ReduceOp.AVG for float32 and bfloat16,
//            torch 2.4 on); each gather's output copied out into the parameters
//            (split_with_sizes_copy: read and write E), in the forward and, under ZeRO-3
//            (reshard_after_forward), again in the backward: 6 + 8 bytes.
// Under reduce_dtype bfloat16 (`--parallel.grad_compression=bf16`; Composer's PURE) a bf16 run
// casts nothing: FSDP1 moves 8 bytes, FSDP2 4 + 8. Both frameworks then add the reduced shard
// into the shard's gradient after the first micro-batch (12 bytes of a 1/dp shard).
// FSDP1's cast and predivide and FSDP2's copy-in run on a side stream beside the next part's
// backward; they are priced as if serial, since an elementwise kernel gets SMs only as the
// backward's GEMM blocks free them. On an H100 (3.35 TB/s) FSDP1's 18 bytes are 70 ms a
// micro-batch of a 13B model: 9% of a 2 x 2048-token micro-batch's compute, 1% of a
// 16 x 2048-token one's.
//
// What overlapping achieves is the cluster file's comm_overlap (the fraction of compute during
// which a collective on its own stream progresses); a convention that does not overlap a
// collective leaves it whole on the critical path whatever the cluster says. The gradient
// buffers' dtype scales the trainer's gradient memory (its fp32 buffers, shards and buckets)
// to grad_buffer_bytes per element: the frameworks' buffers have the same structure, not the
// same dtype.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/dtype.h"
#include "core/status.h"

namespace trident::planner {

struct Convention {
  std::string name = "trident";
  double grad_buffer_bytes = 4.0;  // per gradient element held (the memory model's kGradient)
  double grad_comm_bytes = 4.0;    // per gradient element data parallelism moves
  bool overlaps_reduction[4] = {true, true, true, true};  // by ZeRO stage: gradients reduced inside the backward
  bool overlaps_gathers = true;     // ZeRO-3's all-gathers prefetched behind compute
  // ZeRO-3's backward gathers the next part only after this part's gradients (FSDP1's
  // BACKWARD_POST): exposed, beside the reduce-scatter (Note [Gathers after the gradients]).
  bool gathers_after_gradients = false;
  bool reduces_every_micro_batch[4] = {false, false, true, true};  // by ZeRO stage, under accumulation
  bool pipeline_scatter_gather = false;  // Megatron's pipeline messages split over tp across nodes
  bool unfused_attention = false;        // scores through memory (plan --attention unfused)
  // Under ZeRO-3 and mixed precision, a compute-dtype copy of the rank's shard beside its fp32
  // masters (the trainer's, DeepSpeed's); FSDP casts its fp32 shard as it gathers.
  bool keeps_compute_shard = true;
  // Under ZeRO-0 each gradient is copied into its data-parallel bucket in the last micro-batch
  // (the trainer's DataParallel, PyTorch DDP, DeepSpeed's flattened buckets); Megatron's
  // gradients live in their contiguous buffer.
  bool copies_into_buckets = true;
  // Whose passes over the gradients a sharded micro-batch ends in: 0 the trainer's fold, 1
  // FSDP1's, 2 FSDP2's (Note [Gradient passes a micro-batch]).
  int fsdp_version = 0;
};

// The conventions `plan --convention` names.
inline constexpr const char* kConventionNames[] = {"trident", "megatron", "fsdp", "composer",
                                                   "deepspeed"};

// `name`'s convention for a run in `compute` whose config asks `grad_compression` ("none", "bf16",
// ...): trident's reads it, fsdp's and composer's read "bf16" as FSDP's reduce_dtype bfloat16,
// the others ignore it. An unknown name is an error naming the allowed ones.
StatusOr<Convention> convention_named(const std::string& name, DType compute, const std::string& grad_compression);

// The bytes per parameter a micro-batch of `convention`'s FSDP passes over, in `compute` under
// `zero_stage` with `dp` data-parallel ranks (Note [Gradient passes a micro-batch]); none where
// the run folds as the trainer does.
std::optional<double> fsdp_gradient_pass_bytes(const Convention& convention, DType compute,
                                               int zero_stage, int64_t dp);

}  // namespace trident::planner
