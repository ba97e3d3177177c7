// Ring schedules of the collectives over several hosts: all-reduce, reduce-scatter, all-gather
// and broadcast as lists of point-to-point steps on one rank's working buffer, flat (one ring
// over every rank) or hierarchical (rings inside each host, then across hosts: Note
// [Hierarchical collectives]). Pure descriptions: what to send to and receive from whom, and
// where to reduce; comm/mpi_communicator.cc runs them on MPI, and the schedule test runs them
// for every rank of a simulated job in one process. Each step's bytes are known in advance, so
// a rank can count what it sends per link class exactly and, when a step stalls, name the peer
// (and its host) it waits for.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace trident::comm {

// A range of the working buffer, in elements.
struct Span {
  int64_t offset = 0;
  int64_t count = 0;
};

struct RingStep {
  int send_to = -1;    // rank, or -1: no send in this step
  Span send;
  int recv_from = -1;  // rank, or -1: no receive
  Span recv;
  bool reduce = false;  // the received elements are reduced into recv (else they land there)
  std::string phase;    // "flat ring", "inside the host", "across hosts": for messages
};

// What one rank does: the working buffer's layout (permutations of the input and output) is
// the caller's, see the builders.
struct RingSchedule {
  std::vector<RingStep> steps;
  int64_t max_reduce_count = 0;  // elements of the largest reduced receive (scratch size)
};

// The ring over `ring` (ranks in ring order; `me` is this rank's position) of the blocks
// [offsets[i], offsets[i+1]): after reduce_scatter, position i holds block i reduced over the
// ring; all_gather starts from position i holding block i and ends with every block.
void ring_reduce_scatter(RingSchedule& s, const std::vector<int>& ring, int me, const std::vector<int64_t>& offsets,
                         const std::string& phase);
void ring_all_gather(RingSchedule& s, const std::vector<int>& ring, int me, const std::vector<int64_t>& offsets,
                     const std::string& phase);

// `parts` near-equal blocks of [begin, begin + n): parts + 1 offsets.
std::vector<int64_t> even_offsets(int64_t begin, int64_t n, int parts);

// The collectives for rank `rank` of a communicator with `layout`. Hierarchical ones need the
// same number of ranks on every host (layout.ranks_per_host() > 0).
//
// All-reduce of n elements, in place in the buffer.
RingSchedule all_reduce_schedule(const HostLayout& layout, int rank, int64_t n, bool hierarchical);
// Reduce-scatter of size x n elements: the buffer starts as the input with rank r's block at
// block_offset(layout, r, n, hierarchical), and this rank's result ends at its own block.
RingSchedule reduce_scatter_schedule(const HostLayout& layout, int rank, int64_t n, bool hierarchical);
// All-gather of n elements per rank into size x n: this rank's input goes to its own block
// first; the buffer ends with rank r's block at block_offset(layout, r, n, hierarchical).
RingSchedule all_gather_schedule(const HostLayout& layout, int rank, int64_t n, bool hierarchical);
// Where rank r's block of n elements sits in the working buffer of the two above: flat, at
// r x n; hierarchical, blocks grouped by local index (the rank's position on its host), then
// host, so that each host's ring moves contiguous chunks.
int64_t block_offset(const HostLayout& layout, int r, int64_t n, bool hierarchical);
// dst[i] = op(dst[i], src[i]) for n elements of `dtype` (bf16 and f16 combine in fp32 and
// round back, as the MPI backend's own reductions of them). u16 has no reductions.
void reduce_into(void* dst, const void* src, int64_t n, DType dtype, ReduceOp op);

// Broadcast of n elements from `root`: a pipelined chain along the ring in chunks.
RingSchedule broadcast_schedule(const HostLayout& layout, int rank, int root, int64_t n, int64_t chunk);

}  // namespace trident::comm
