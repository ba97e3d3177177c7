#include "planner/pipeline_sim.h"

#include <algorithm>
#include <limits>

#include "core/check.h"

namespace trident::planner {

// Note [Simulated pipeline]
// A closed form for the bubble, (p - 1) / v times the slowest stage's micro-batch, assumes
// equal stages. They are not: the last holds the LM head, which on the small configs costs
// more than all its blocks (small, pp2: 79% of the work on the last rank), and a 1F1B step
// is then about m x the last stage + (p - 1) x the others' forward and backward, not
// (m + p - 1) x the last (measured on small, pp2 b2 m2: 5.14 s; the closed form 6.51 s). So
// the planner runs the schedule itself: each rank takes its ops in order, an op starts when
// the rank is free and its input is there (the previous chunk's activation, the next
// chunk's gradient, message_s after their sender posted them), and posts its output when it
// ends; an interleaved unit (forward + backward) waits for both inputs and posts both outputs
// after its backward, as Pipeline does. A tied weight reaches the last rank before its first
// op, and its head gradient reaches rank 0 before the last backward of chunk 0.
double simulate_pipeline(const parallel::PipelineLayout& layout, const std::string& schedule, int m,
                         const PipelineCosts& costs) {
  const int P = layout.stages, chunks = layout.num_chunks();
  TRI_CHECK(static_cast<int>(costs.forward.size()) == chunks && static_cast<int>(costs.backward.size()) == chunks,
            "simulate_pipeline: costs for ", costs.forward.size(), " chunks, the layout has ", chunks);
  const double never = std::numeric_limits<double>::infinity();
  std::vector<std::vector<parallel::PipelineOp>> ops(static_cast<size_t>(P));
  for (int r = 0; r < P; ++r) ops[static_cast<size_t>(r)] = parallel::pipeline_schedule(schedule, layout, r, m);
  // When each (chunk, micro-batch)'s activation and input gradient were posted.
  std::vector<double> activation(static_cast<size_t>(chunks * m), never), gradient(activation);
  auto at = [m](int chunk, int micro) { return static_cast<size_t>(chunk * m + micro); };
  std::vector<double> clock(static_cast<size_t>(P), 0.0);
  std::vector<size_t> next(static_cast<size_t>(P), 0);
  const bool tied = P > 1 && costs.tied;
  if (tied) clock.back() = costs.weight_s;
  double head_grad = tied ? never : 0.0;

  auto chunk_of = [P](int r, const parallel::PipelineOp& op) { return op.local_chunk * P + r; };
  auto ready = [&](int r, const parallel::PipelineOp& op) {
    const int c = chunk_of(r, op);
    if (op.forward) return c == 0 ? 0.0 : activation[at(c - 1, op.micro)] + costs.message_s;
    double t = c == chunks - 1 ? 0.0 : gradient[at(c + 1, op.micro)] + costs.message_s;
    if (c == 0 && op.micro == m - 1) t = std::max(t, head_grad);
    return t;
  };
  auto cost = [&](int r, const parallel::PipelineOp& op) {
    const size_t c = static_cast<size_t>(chunk_of(r, op));
    return op.forward ? costs.forward[c] : costs.backward[c];
  };
  auto post = [&](int r, const parallel::PipelineOp& op, double t) {
    const int c = chunk_of(r, op);
    if (op.forward && c < chunks - 1) activation[at(c, op.micro)] = t;
    if (!op.forward && c > 0) gradient[at(c, op.micro)] = t;
  };

  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < P; ++r) {
      std::vector<parallel::PipelineOp>& mine = ops[static_cast<size_t>(r)];
      size_t& k = next[static_cast<size_t>(r)];
      while (k < mine.size()) {
        const bool unit = mine[k].with_next && k + 1 < mine.size();
        double start = std::max(clock[static_cast<size_t>(r)], ready(r, mine[k]));
        if (unit) start = std::max(start, ready(r, mine[k + 1]));
        if (start == never) break;
        double end = start + cost(r, mine[k]);
        if (unit) end += cost(r, mine[k + 1]);
        post(r, mine[k], end);
        if (unit) post(r, mine[k + 1], end);
        clock[static_cast<size_t>(r)] = end;
        k += unit ? 2 : 1;
        progress = true;
      }
      if (tied && r == P - 1 && k == mine.size() && head_grad == never)
        head_grad = clock[static_cast<size_t>(r)] + costs.head_grad_s;
    }
  }
  for (int r = 0; r < P; ++r)
    TRI_CHECK(next[static_cast<size_t>(r)] == ops[static_cast<size_t>(r)].size(), "simulate_pipeline: rank ", r,
              " of ", P, " stops at op ", next[static_cast<size_t>(r)], " of ", ops[static_cast<size_t>(r)].size(),
              " (schedule ", schedule, ", ", m, " micro-batches): an input never arrives");
  return *std::max_element(clock.begin(), clock.end());
}

}  // namespace trident::planner
