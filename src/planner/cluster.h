// The machines a run is planned for: how many devices, how fast they compute and how fast
// they talk. Read from a cluster file (TOML, sections below; examples in configs/clusters/),
// or written by `trident calibrate` for this machine (planner/calibrate.h), which measures
// the same fields. Every key is typed and checked: a file with an unknown key, a wrong type
// or a value out of range is an error naming the file, the key and what is allowed
// (config/config_tree.h).
//
//   [cluster]     name, nodes, devices_per_node, host_memory_gib (each node's, for
//                 ZeRO-Offload's state), disk_read_gbs / disk_write_gbs (each node's disk
//                 under parallel.nvme_path, for the NVMe tier: sequential rates of all its
//                 ranks at once, as calibrate measures them through the tier's own file; 0,
//                 the default and the shipped files' (their disks' rates are not published):
//                 unknown, and a plan with the tier is then an error naming them,
//                 planner/nvme_tier.h)
//   [device]      kind ("cpu" ranks of a host, or "gpu"); memory_gib; peak_tflops_fp32 / _bf16
//                 / _fp16; gemm_efficiency (the fraction of peak the model's large GEMMs
//                 reach); memory_bandwidth_gbs (the memory-bound ops' rate);
//                 attention_efficiency (the attention kernel's
//                 fraction of the GEMM rate); comm_overlap (the fraction of the compute that
//                 a data-parallel or ZeRO collective issued beside it hides behind, where the
//                 framework overlaps it: GPUs with NCCL on its own stream near 1, CPU ranks 0,
//                 their MPI progressing only inside calls; Note [Overlapped data-parallel
//                 traffic] in planner/data_parallel_time.h); allocator_headroom (what the
//                 allocator holds beyond the tensors' peak, as a fraction of it: a layout fits
//                 when peak x (1 + this) is within memory_gib);
//                 gemm_half_rows (the GEMMs' rate falls with a micro-batch's rows n as
//                 peak x n / (n + gemm_half_rows); calibrate fits it from two micro-batch sizes);
//                 attention_half_head_size (attention's rate falls with the head size d as
//                 attention_efficiency x d / (d + this): flash attention's tiles are d wide;
//                 calibrate fits it from two head sizes); unfused_attention_efficiency (an
//                 unfused attention's score GEMMs' fraction of the GEMM rate, for runs planned
//                 with `plan --attention unfused`: Note [Unfused attention]); gemm_half_k (a GEMM's
//                 rate falls with its reduction length K as K / (K + this): Note [GEMMs by shape]
//                 in planner/gemm_time.h; calibrate fits it from the model's width and half of it);
//                 collective_skew_us and collective_skew_fraction (the wait for the slowest of 2
//                 ranks at each blocking collective, beyond its own time: Note [The ranks' skew
//                 at a blocking collective] in planner/collective_skew.h; calibrate measures them)
//   [intra_node]  bandwidth_gbs (per device, one direction: NVLink, or shared memory for CPU
//                 ranks), latency_us, reduce_scatter_factor, all_gather_factor and
//                 all_to_all_factor (each one's time over the ring model's: 1 for NCCL,
//                 measured by calibrate)
//   [inter_node]  bandwidth_gbs (per device: its share of the node's NICs), latency_us
#pragma once

#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "core/options.h"
#include "core/status.h"

namespace trident::planner {

struct ClusterShape {
  std::string name = "this machine";
  int64_t nodes = 1;
  int64_t devices_per_node = 1;
  double host_memory_gib = 0.0;  // each node's host memory (0: not checked); ZeRO-Offload's state lives there
  double disk_read_gbs = 0.0;    // each node's disk for the NVMe tier, all its ranks together (0: unknown)
  double disk_write_gbs = 0.0;
  static const OptionTable<ClusterShape>& table();
};

struct DeviceSpec {
  std::string kind = "cpu";  // "cpu" (ranks of a host: this machine) or "gpu"
  double memory_gib = 16.0;
  double peak_tflops_fp32 = 1.0;
  double peak_tflops_bf16 = 1.0;
  double peak_tflops_fp16 = 1.0;
  double gemm_efficiency = 1.0;
  double memory_bandwidth_gbs = 50.0;
  double attention_efficiency = 0.5;
  double comm_overlap = 0.0;
  double allocator_headroom = 0.0;  // a layout's peak x (1 + this) must fit memory_gib
  double gemm_half_rows = 0.0;
  double attention_half_head_size = 0.0;  // 0: attention's rate does not depend on the head size
  double gemm_half_k = 0.0;               // 0: a GEMM's rate does not depend on its reduction length
  double unfused_attention_efficiency = 0.0;  // 0: attention_efficiency's
  double vocab_loss_ns_per_logit = 0.0;  // 0: the vocabulary-parallel loss's passes at memory_bandwidth_gbs
  double fused_loss_ns_per_logit = 0.0;  // 0: the fused loss's passes at memory_bandwidth_gbs
  // The wait for the slowest of 2 ranks at a blocking collective (Note [The ranks' skew at a
  // blocking collective] in planner/collective_skew.h): per collective, and per second of the
  // compute before it.
  double collective_skew_us = 0.0;
  double collective_skew_fraction = 0.0;
  static const OptionTable<DeviceSpec>& table();
};

struct LinkSpec {
  double bandwidth_gbs = 10.0;
  double latency_us = 5.0;
  // Each collective's time over the ring model's (an all-reduce is what bandwidth_gbs and
  // latency_us are fitted to): Note [Collectives as measured] in planner/collectives.h.
  double reduce_scatter_factor = 1.0;
  double all_gather_factor = 1.0;
  double all_to_all_factor = 1.0;  // a mixture's exchanges (expert parallelism's all_to_all_v)
};
struct IntraNodeLink : LinkSpec {
  static const OptionTable<IntraNodeLink>& table();
};
struct InterNodeLink : LinkSpec {
  static const OptionTable<InterNodeLink>& table();
};

struct Cluster {
  ClusterShape shape;
  DeviceSpec device;
  IntraNodeLink intra;
  InterNodeLink inter;

  int64_t devices() const { return shape.nodes * shape.devices_per_node; }
  int64_t memory_bytes() const;
  // Whether a rank whose tensors peak at `peak` bytes fits the device, with allocator_headroom.
  bool device_fits(int64_t peak) const;
  // Whether the host memory `per_rank` bytes of each of a node's ranks (of `ranks` in all) fit
  // (Note [ZeRO-Offload's memory]); always, without host_memory_gib.
  bool host_fits(int64_t per_rank, int64_t ranks) const;
  bool gpu() const { return device.kind == "gpu"; }
  // The GEMM rate the time model uses for `dtype` (FLOP/s) at `rows` rows (tokens of a
  // micro-batch): peak x gemm_efficiency x rows / (rows + gemm_half_rows).
  double gemm_flops(DType dtype, double rows) const;
  // The attention kernel's rate (FLOP/s) at head size `head_size`: a fused (flash) kernel's,
  // the GEMM rate x attention_efficiency x d / (d + attention_half_head_size); an unfused
  // one's, its scores through memory (Note [Unfused attention]).
  double attention_flops(DType dtype, double head_size, bool unfused = false) const;
  // Whether groups of `span` consecutive ranks (tp's; dp x tp's: a data-parallel group's reach),
  // aligned at multiples of span, among `ranks`, cross a node boundary: wider than a node, or
  // not dividing it on more than one node (tp 6 on 8-device nodes: ranks 6-11 straddle two).
  bool crosses_nodes(int64_t span, int64_t ranks) const;
  // The link such groups talk over: the network when one crosses (a collective runs at its
  // slowest group's pace), else NVLink (or a host's shared memory).
  const LinkSpec& link_for(int64_t span, int64_t ranks) const;

  // The file's text as TOML (what calibrate writes).
  std::string to_toml() const;
};

// Reads and checks a cluster file; errors name the file and the key.
StatusOr<Cluster> load_cluster(const std::string& path);
StatusOr<Cluster> parse_cluster(const std::string& text, const std::string& source_name);
// `ranks` devices of this machine, one node, before calibration: the defaults above (CPU-like).
Cluster local_cluster(int64_t ranks);

}  // namespace trident::planner
