// The pipeline's step as its schedule runs it: every rank's ops in parallel::pipeline_schedule's
// order, each starting when its rank is free and its input has arrived (Note [Simulated
// pipeline]). The time model (time_model.h) takes the pipeline's bubble and its exposed
// point-to-point time from it.
#pragma once

#include <string>
#include <vector>

#include "parallel/pipeline.h"

namespace trident::planner {

struct PipelineCosts {
  // Seconds per micro-batch of each chunk (model order): its forward, and its backward with
  // any recomputation; the first chunk's include the embedding, the last's the head and loss.
  std::vector<double> forward, backward;
  double message_s = 0.0;  // one activation (or its gradient) from one rank to the next
  // A tied embedding and head (GPT-2's wte): the weight goes from rank 0 to the last rank
  // before its first op, the head's gradient back after its last.
  bool tied = false;
  double weight_s = 0.0, head_grad_s = 0.0;
};

// Seconds from the step's start to the last rank's last op; throws if the schedule cannot
// finish (an op waiting for one that never runs).
double simulate_pipeline(const parallel::PipelineLayout& layout, const std::string& schedule, int micro_batches,
                         const PipelineCosts& costs);

}  // namespace trident::planner
