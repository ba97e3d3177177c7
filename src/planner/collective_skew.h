// What a blocking collective costs beyond its own time: the wait for the group's slowest rank.
//
// Note [The ranks' skew at a blocking collective]
// Between two blocking collectives every rank computes the same work, but not in the same time:
// a core is interrupted, a cache is shared, a GPU's clock moves. The collective ends only when
// its last rank arrives, so each one costs the expected maximum of the group's times over
// their mean. The collectives' own rates are measured with the ranks lined up (calibrate's
// barrier before each: Note [Collectives as measured]), so that wait was nowhere in the model.
// On one Zen 4 host's two ranks it was 0.1-1.7 ms a collective. Counted, from the same
// calibrations, the 2-rank tiny-moe ep2 layouts went from 26 to 35 of 36 within 10% in a first
// run (mean -6.9% to -1.1%) and its tp2 ones from 19 to 23 of 24 in two; in every set the mean
// error moved toward 0, but in a noisier hour the VM's drift (7-18% between runs of the same
// layouts) was larger than the skew (bench/results/2026-12-02-planner-collective-skew-zen4).
// `trident calibrate` measures it: rounds of the same GEMM segment on every rank, each ended by
// a one-element all-reduce, against the slowest rank's same rounds without it (a rank that is
// always slower is in calibrate's rates already), at two segment lengths, so that the wait is
// `collective_skew_us` + `collective_skew_fraction` x the segment. The time model adds it to
// every blocking collective of tensor and expert parallelism (their all-reduces, an all-gather
// and a reduce-scatter each under sequence parallelism, and exchanges; the segment is the
// compute between two of them). For a group of n ranks it scales the wait by the expected
// maximum of n normal deviates over 2's (x1.8 for 4 ranks, x2.5 for 8, x5.8 for 1,024): an
// assumption, as only 2 ranks were measured. The shipped GPU files leave both at 0: no GPU has
// measured them.
#pragma once

#include <cstdint>
#include <functional>

#include "comm/communicator.h"
#include "planner/cluster.h"

namespace trident::planner {

// E[max of n independent standard normal deviates]: 0 for n <= 1, 0.564 for 2, 3.25 for 1,024.
double expected_max_of_normals(double n);

// The expected wait for the slowest of `group` ranks at each of `syncs` blocking collectives
// separated by `segment_s` of compute, from `device`'s collective_skew_us and
// collective_skew_fraction (measured for 2 ranks).
double skew_wait_s(const DeviceSpec& device, double group, double syncs, double segment_s);

struct CollectiveSkew {
  double wait_us = 0.0;   // per collective, whatever the segment (2 ranks)
  double fraction = 0.0;  // of the segment before it
};

// Measures the skew of `comm`'s ranks with `segment(n)` running n units of the same work on
// every rank; collective. Rounds of about `short_s` and `long_s` of work, each followed by a
// one-element all-reduce, against the same without it, in turns; the result is scaled to 2
// ranks. Without a communicator or with one rank, zero.
CollectiveSkew measure_collective_skew(comm::Communicator* comm,
                                       const std::function<void(int64_t)>& segment,
                                       double short_s = 0.002, double long_s = 0.016);

}  // namespace trident::planner
