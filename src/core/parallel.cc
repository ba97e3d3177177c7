#include "core/parallel.h"

#include <sched.h>

#include <atomic>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#include "core/check.h"

namespace trident {

void set_num_threads(int n) {
  TRI_CHECK(n >= 1, "set_num_threads: the thread count must be >= 1, got ", n);
  omp_set_num_threads(n);
}

int num_threads() { return omp_get_max_threads(); }

int cpus_available() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
  return CPU_COUNT(&set);
}

namespace {
std::atomic<int> g_denormal_mode{0};      // 0: IEEE arithmetic, 1: flush denormals to zero
thread_local int tls_applied_mode = -1;   // what this thread's MXCSR was last set to
}  // namespace

void set_flush_denormals(bool on) {
  g_denormal_mode.store(on ? 1 : 0, std::memory_order_relaxed);
  apply_denormal_mode();
}

bool flush_denormals() { return g_denormal_mode.load(std::memory_order_relaxed) == 1; }

void apply_denormal_mode() {
  const int mode = g_denormal_mode.load(std::memory_order_relaxed);
  if (mode == tls_applied_mode) return;
#if defined(__x86_64__) || defined(__i386__)
  constexpr unsigned kFlushToZero = 0x8000, kDenormalsAreZero = 0x0040;
  unsigned csr = _mm_getcsr();
  csr = mode ? (csr | kFlushToZero | kDenormalsAreZero) : (csr & ~(kFlushToZero | kDenormalsAreZero));
  _mm_setcsr(csr);
#endif
  tls_applied_mode = mode;
}

}  // namespace trident
