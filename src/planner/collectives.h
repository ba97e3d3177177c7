// The time of a collective over a group of the mesh, priced by the links it crosses: a ring
// inside a node, and across nodes the hierarchical algorithm (a ring inside each node, then
// one across the nodes with each device's share of the node's network cards), as NCCL's
// rings and trees and the trainer's parallel.hierarchical run it.
//
// Note [Collectives across nodes]
// A group is n ranks `stride` apart (the trainer places tensor parallelism innermost, then
// expert, data and pipeline parallelism: a dense data-parallel group is dp x ep ranks tp
// apart). When it holds k members on each of N nodes, an all-reduce of B bytes is a
// reduce-scatter among a node's k members (NVLink), an all-reduce of the B / k each member
// then holds with its peers on the other nodes, and an all-gather back:
//   2 (k-1)/k B / intra + 2 (N-1)/N (B/k) / inter + 2 (k-1) intra latencies + 2 (N-1) inter
// where inter is a device's share of its node's cards (the cluster file's inter_node
// bandwidth_gbs): every device of a node is in one of the groups that reduce at once, each on
// its own card (rail-optimised fabrics: a member's peers sit at the same index of their
// nodes, on the same rail). A reduce-scatter or all-gather is half of that. Priced as one ring
// at the network's rate instead, a data-parallel all-reduce over 16 DGX nodes (k = 8) took
// 2 x 15/16 B at 50 GB/s where NCCL's measured bus bandwidth is near the node's 8 cards,
// 400 GB/s (the "ignoring the node's other cards"). A group whose members do not sit
// k to a node evenly (tp 6 on 8-device nodes) is one ring at the network's rate, its slowest
// link.
#pragma once

#include <cstdint>

#include "planner/cluster.h"

namespace trident::planner {

// Note [Collectives as measured]
// The ring model prices a reduce-scatter and an all-gather at half an all-reduce each, as
// NCCL's rings run them. MPI need not: OpenMPI 4 between two ranks of this 2-core machine took
// 171 ms for a 131 MB MPI_Reduce_scatter_block against 96 ms for the same MPI_Allreduce, and
// 20 ms for the all-gather (ZeRO-2's per-micro-batch reduce-scatter was priced at a quarter of
// what it cost: tiny-moe ZeRO-2 b1 m4, -24%). So a link carries each one's factor over the
// ring model's time (reduce_scatter_factor, all_gather_factor: 1 in the GPU files), which
// calibrate measures on CPU ranks through the trainer's own calls. Expert parallelism's
// all_to_all_v is priced as (n - 1) / n of its bytes at the link's rate plus n - 1 latencies,
// times the link's all_to_all_factor, measured alike at the model's exchange.
enum class Collective { kAllReduce, kReduceScatter, kAllGather };

// Every group of `size` ranks `stride` apart among `ranks` (the layout's), each moving a
// buffer of `bytes`.
struct MeshGroup {
  int64_t size = 1;
  int64_t stride = 1;
};

// How a group sits on the nodes: `per_node` members on each of `nodes` nodes, or uneven.
struct GroupPlacement {
  int64_t per_node = 1;
  int64_t nodes = 1;
  bool uneven = false;  // members not k to a node: one ring at the network's rate
};
GroupPlacement place_group(const MeshGroup& g, int64_t ranks, const Cluster& cluster);

double collective_seconds(Collective c, double bytes, const MeshGroup& g, int64_t ranks, const Cluster& cluster);

// Time of a ring collective over `n` ranks moving `bytes` (the buffer's size) on one link.
double all_reduce_seconds(double bytes, int64_t n, const LinkSpec& link);
double reduce_scatter_seconds(double bytes, int64_t n, const LinkSpec& link);  // also all-gather

}  // namespace trident::planner
