// CPU seconds this process has used, every thread's user and system time together: what a
// timing on a machine shared with other work does not distort (benchmarks, planner/measure).
#pragma once

#include <ctime>

namespace trident {

inline double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

}  // namespace trident
