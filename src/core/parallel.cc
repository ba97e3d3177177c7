#include "core/parallel.h"

#include "core/check.h"

namespace trident {

void set_num_threads(int n) {
  TRI_CHECK(n >= 1, "set_num_threads: the thread count must be >= 1, got ", n);
  omp_set_num_threads(n);
}

int num_threads() { return omp_get_max_threads(); }

}  // namespace trident
