#include "planner/data_parallel_time.h"

#include <algorithm>

namespace trident::planner {

double exposed_behind(double comm_s, double compute_s, double buckets, double overlap) {
  if (comm_s <= 0.0) return 0.0;
  const double n = std::max(1.0, buckets);
  return std::max(comm_s / n, comm_s - overlap * compute_s * (n - 1.0) / n);
}

DataParallelTime data_parallel_time(int zero_stage, const DataParallelCollectives& c, const MicroBatchPhases& p,
                                    const Convention& convention, double comm_overlap) {
  const int z = std::clamp(zero_stage, 0, 3);
  const double reduce_overlap = convention.overlaps_reduction[z] ? comm_overlap : 0.0;
  const double gather_overlap = convention.overlaps_gathers ? comm_overlap : 0.0;
  const double m = std::max(1.0, p.micro_batches);
  // Micro-batches whose backward reduces the gradients: every one, or the last.
  const double reducing = convention.reduces_every_micro_batch[z] ? m : 1.0;
  DataParallelTime t;
  if (z < 3) {
    const double reduced = exposed_behind(c.reduce_s, p.backward_s, p.grad_buckets, reduce_overlap);
    t.total_s = reducing * c.reduce_s + (z > 0 ? c.gather_s : 0.0);
    t.exposed_s = reducing * reduced + (z > 0 ? c.gather_s : 0.0);
    return t;
  }
  // ZeRO-3: each micro-batch's gathers behind its forward and backward, the backward's beside
  // the gradients' reduce-scatter where that micro-batch reduces.
  const double forward = exposed_behind(c.gather_s, p.forward_s, p.parts, gather_overlap);
  double backward_gather = 0.0, backward_reducing = 0.0;
  if (convention.gathers_after_gradients) {  // Note [Gathers after the gradients]
    backward_gather = c.gather_s;
    backward_reducing =
        c.gather_s +
        exposed_behind(c.reduce_s, p.backward_s, std::max(p.parts, p.grad_buckets), reduce_overlap);
  } else {
    backward_gather = exposed_behind(c.gather_s, p.backward_s, p.parts, gather_overlap);
    // Both share the backward's compute, at the smaller of their overlaps.
    backward_reducing =
        exposed_behind(c.gather_s + c.reduce_s, p.backward_s, std::max(p.parts, p.grad_buckets),
                       std::min(gather_overlap, reduce_overlap));
  }
  t.total_s = m * 2.0 * c.gather_s + reducing * c.reduce_s;
  t.exposed_s = m * forward + reducing * backward_reducing + (m - reducing) * backward_gather;
  return t;
}

}  // namespace trident::planner
