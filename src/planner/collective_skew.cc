#include "planner/collective_skew.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/factory.h"
#include "planner/calibration_timer.h"

namespace trident::planner {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

double expected_max_of_normals(double n) {
  if (n <= 1.0) return 0.0;
  // E[max] of 2^i deviates, i = 0..20 (the integral of x n phi(x) Phi(x)^(n - 1), Simpson's
  // rule); between them linear in log2 n (1% low at 3 and 6), past 2^20 growing as sqrt(ln n).
  static constexpr double kByLog2[] = {0.0,    0.5642, 1.0294, 1.4236, 1.7660, 2.0697, 2.3437,
                                       2.5946, 2.8269, 3.0439, 3.2482, 3.4418, 3.6261, 3.8023,
                                       3.9714, 4.1341, 4.2911, 4.4430, 4.5903, 4.7332, 4.8723};
  const double x = std::log2(n);
  if (x >= 20.0) return kByLog2[20] * std::sqrt(std::log(n) / std::log(1048576.0));
  const int i = static_cast<int>(x);
  return kByLog2[i] + (x - i) * (kByLog2[i + 1] - kByLog2[i]);
}

double skew_wait_s(const DeviceSpec& device, double group, double syncs, double segment_s) {
  if (group <= 1.0 || syncs <= 0.0) return 0.0;
  const double two =
      device.collective_skew_us * 1e-6 + device.collective_skew_fraction * std::max(0.0, segment_s);
  return syncs * two * expected_max_of_normals(group) / expected_max_of_normals(2.0);
}

CollectiveSkew measure_collective_skew(comm::Communicator* comm,
                                       const std::function<void(int64_t)>& segment, double short_s,
                                       double long_s) {
  CollectiveSkew out;
  if (!comm || comm->size() <= 1) return out;
  const Tensor one = full({1}, 0.0, DType::kF64);
  // A unit's time on the slowest rank, after a warm-up: every rank runs the same units.
  segment(2);
  comm->barrier();
  Clock::time_point t0 = Clock::now();
  segment(8);
  const double unit = std::max(slowest_rank(comm, since(t0)) / 8.0, 1e-7);
  // The ranks lined up, a one-element all-reduce's own time.
  comm->barrier();
  t0 = Clock::now();
  for (int i = 0; i < 50; ++i) comm->all_reduce(one);
  const double latency = slowest_rank(comm, since(t0)) / 50.0;

  struct Point {
    double segment_s = 0.0, wait_s = 0.0;
  };
  auto point = [&](int64_t units) {
    // 2 s of work at each length in 6 turns: on one Zen 4 host the waits are tenths of a
    // millisecond, and 0.4 s at a length put them anywhere from 0.07 to 0.96 ms.
    const int turns = 6;
    const int rounds = static_cast<int>(
        std::clamp(2.0 / turns / (static_cast<double>(units) * unit), 5.0, 4000.0));
    double with = 0.0, alone = 0.0;
    for (int turn = 0; turn < turns; ++turn) {  // in turns, so that drift moves both alike
      comm->barrier();
      t0 = Clock::now();
      for (int r = 0; r < rounds; ++r) {
        segment(units);
        comm->all_reduce(one);
      }
      with += slowest_rank(comm, since(t0)) / rounds;
      comm->barrier();
      t0 = Clock::now();
      for (int r = 0; r < rounds; ++r) segment(units);
      // The slowest rank's own time, as calibrate's rates are: a rank that is always slower
      // is in those already, and the wait beyond it is the rounds' variation.
      alone += slowest_rank(comm, since(t0) / rounds);
    }
    return Point{alone / turns, std::max(0.0, (with - alone) / turns - latency)};
  };
  // Two lengths apart even where one unit outlasts the short one: the fit needs both.
  const int64_t short_units = std::max<int64_t>(1, std::lround(short_s / unit));
  const int64_t long_units = std::max<int64_t>(4 * short_units, std::lround(long_s / unit));
  const Point a = point(short_units), b = point(long_units);
  // wait = w0 + w1 x segment through the two points, neither part negative.
  double w1 = b.segment_s > a.segment_s ? (b.wait_s - a.wait_s) / (b.segment_s - a.segment_s) : 0.0;
  w1 = std::max(0.0, w1);
  double w0 = a.wait_s - w1 * a.segment_s;
  if (w0 < 0.0) {
    w0 = 0.0;
    w1 = b.segment_s > 0.0 ? b.wait_s / b.segment_s : 0.0;
  }
  // Scaled to 2 ranks (Note [The ranks' skew at a blocking collective]).
  const double to_two =
      expected_max_of_normals(2.0) / expected_max_of_normals(static_cast<double>(comm->size()));
  out.wait_us = w0 * 1e6 * to_two;
  out.fraction = w1 * to_two;
  return out;
}

}  // namespace trident::planner
