#include "parallel/parallel_options.h"

namespace trident::parallel {

// Note [The parameter tier's read-ahead depth]
// Why is parallel.nvme_prefetch_depth 2 by default? A part's shard read ahead d parts overlaps
// those d parts' compute (Note [The parameter tier's pipeline] in zero/parameter_store.h). One
// block's forward is the shortest compute there is, and the root part (embeddings, head) is
// several blocks' bytes (GPT-2 124M: 5.5) and is read at the forward's end for the backward's
// first gather: with 2 its read overlaps two blocks' forwards, and a slow request has a part's
// time to catch up. Each step of depth costs one part's shard of host memory (1/N of a block,
// the root's when it is among them), small beside the shard the tier keeps on disk.

const OptionTable<ParallelOptions>& ParallelOptions::table() {
  static const auto t =
      OptionTable<ParallelOptions>("parallel", "Distributed training across the ranks of mpirun")
          .add("tp", &ParallelOptions::tp,
               "tensor-parallel degree: each layer split across this many ranks (Megatron-LM's layout); "
               "the ranks form (ranks / tp) data-parallel groups",
               Range::at_least(1))
          .add("sequence_parallel", &ParallelOptions::sequence_parallel,
               "with tp > 1, also split the layer norms, residuals and embeddings along the sequence "
               "(data.seq_len divisible by tp)")
          .add("pp", &ParallelOptions::pp,
               "pipeline-parallel stages: the blocks split into consecutive chunks on this many ranks; "
               "data.grad_accum_steps micro-batches stream through them",
               Range::at_least(1))
          .add("ep", &ParallelOptions::ep,
               "expert-parallel degree: a mixture-of-experts layer's experts split over this many ranks, tokens "
               "sent to their experts' ranks (all-to-all); those ranks are also data-parallel replicas of every "
               "dense parameter",
               Range::at_least(1))
          .add("virtual_stages", &ParallelOptions::virtual_stages,
               "model chunks per pipeline rank (more than 1: the interleaved schedule)", Range::at_least(1))
          .add("pipeline_schedule", &ParallelOptions::pipeline_schedule, "order of the micro-batches' forwards and backwards",
               {"1f1b", "gpipe", "interleaved"})
          .add("pipeline_layers", &ParallelOptions::pipeline_layers,
               "blocks of each pipeline chunk, comma-separated (pp x virtual_stages numbers); empty: balanced")
          .add("zero_stage", &ParallelOptions::zero_stage,
               "ZeRO stage: 0 = data parallel, 1 = + optimizer state sharded, 2 = + gradients sharded, "
               "3 = + parameters sharded",
               Range::between(0, 3))
          .add("bucket_mb", &ParallelOptions::bucket_mb, "gradient all-reduce bucket size (MiB)", Range::positive())
          .add("offload_optimizer", &ParallelOptions::offload_optimizer,
               "ZeRO-Offload: keep fp32 master weights and AdamW state in host memory and step them on the CPU "
               "(with train.device = cuda: a model whose optimizer state does not fit on the GPU)")
          .add("offload_optimizer_device", &ParallelOptions::offload_optimizer_device,
               "where offload_optimizer keeps the optimizer state: cpu (host memory, ZeRO-Offload) or nvme (files "
               "under nvme_path, read and written unit by unit around each step: ZeRO-Infinity; needs "
               "zero_stage 1-3)",
               {"cpu", "nvme"})
          .add("offload_param", &ParallelOptions::offload_param,
               "where ZeRO-3 keeps this rank's parameter shard: none (memory, on train.device) or nvme (a file "
               "under nvme_path, each part's shard read ahead of its all-gathers into host memory and written back "
               "as it is stepped: ZeRO-Infinity; needs zero_stage 3 and offload_optimizer)",
               {"none", "nvme"})
          .add("nvme_path", &ParallelOptions::nvme_path,
               "offload_optimizer_device = nvme or offload_param = nvme: the directory (on a fast local disk) for "
               "each rank's scratch files (optimizer state, parameters); removed at the end of the run")
          .add("nvme_buffer_count", &ParallelOptions::nvme_buffer_count,
               "offload_optimizer_device = nvme: buckets of optimizer state in host memory at once (the one "
               "stepped, those read ahead, those being written)",
               Range::between(2, 64))
          .add("nvme_buffer_mb", &ParallelOptions::nvme_buffer_mb,
               "offload_optimizer_device = nvme: the unit the tier moves, MiB of each of the masters, m and v (a "
               "staging buffer holds one unit: 3 x this; units cut across parameters and buckets)",
               Range::positive())
          .add("nvme_queue_depth", &ParallelOptions::nvme_queue_depth,
               "offload_optimizer_device or offload_param = nvme: disk requests in flight per rank and file "
               "(io_uring)",
               Range::between(1, 1024))
          .add("nvme_prefetch_depth", &ParallelOptions::nvme_prefetch_depth,
               "offload_param = nvme: parts whose parameter shards are read ahead beyond the one being gathered "
               "(host memory holds this + 1 parts' shards; 0: each is read when its gather starts)",
               Range::between(0, 64))
          .add("hierarchical", &ParallelOptions::hierarchical,
               "collectives over several hosts: reduce inside each host first, so that fewer bytes cross hosts "
               "(on), one ring through every rank (off), or on where the hosts' link is the bottleneck (auto)",
               {"auto", "on", "off"})
          .add("intra_host_gbps", &ParallelOptions::intra_host_gbps,
               "bandwidth between two ranks of a host (Gbit/s) for hierarchical = auto; 0: measured at start",
               Range::at_least(0))
          .add("inter_host_gbps", &ParallelOptions::inter_host_gbps,
               "bandwidth of a host's link to the others (Gbit/s) for hierarchical = auto; 0: measured at start",
               Range::at_least(0))
          .add("grad_compression", &ParallelOptions::grad_compression,
               "how data parallelism exchanges gradients: none (fp32 all-reduce), bf16 (all-reduce in bf16), "
               "powersgd (PyTorch's PowerSGD hook: rank-r factors with error feedback), onebit_adam (DeepSpeed's "
               "1-bit Adam: Adam for a warm-up, then frozen variance and momentum exchanged as signs)",
               {"none", "bf16", "powersgd", "onebit_adam"})
          .add("powersgd_rank", &ParallelOptions::powersgd_rank,
               "PowerSGD: rank of each gradient matrix's approximation (matrix_approximation_rank)", Range::at_least(1))
          .add("powersgd_start_step", &ParallelOptions::powersgd_start_step,
               "PowerSGD: optimizer steps of uncompressed all-reduce before compression starts (start_powerSGD_iter)",
               Range::at_least(0))
          .add("onebit_warmup_steps", &ParallelOptions::onebit_warmup_steps,
               "1-bit Adam: steps of full AdamW (all-reduced gradients) before the variance freezes and momentum "
               "is exchanged as signs (DeepSpeed's freeze_step)",
               Range::at_least(1))
          .add("onebit_block", &ParallelOptions::onebit_block,
               "1-bit Adam: elements per scale of the compressed momentum (a multiple of 32); 0: one scale per "
               "rank's buffer and per chunk, as DeepSpeed (which diverged on GPT-2's tied embedding)",
               Range::at_least(0))
          .add("onebit_bound_update", &ParallelOptions::onebit_bound_update,
               "1-bit Adam: bound each element's step by the learning rate (|m| <= sqrt(v) in the update), so an "
               "element whose variance froze near zero cannot take a huge step; false: DeepSpeed's update")
          .add("auto", &ParallelOptions::auto_layout,
               "trident train replaces tp, pp, virtual_stages, zero_stage, sequence_parallel, offload, "
               "model.activation_checkpointing and the micro-batching (data.batch_size x grad_accum_steps kept) "
               "by the planner's fastest layout that fits the ranks it was started with, and prints why")
          .add("auto_cluster", &ParallelOptions::auto_cluster,
               "with auto: the cluster file to plan with (trident calibrate writes one for this machine); "
               "\"\": this machine's uncalibrated defaults");
  return t;
}

}  // namespace trident::parallel
