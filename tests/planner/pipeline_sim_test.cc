// The planner's pipeline simulation (planner/pipeline_sim.h) against step times worked out by
// hand from the schedules' orders.
#include "planner/pipeline_sim.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace trident::planner {
namespace {

PipelineCosts uniform(int chunks, double forward, double backward) {
  PipelineCosts c;
  c.forward.assign(static_cast<size_t>(chunks), forward);
  c.backward.assign(static_cast<size_t>(chunks), backward);
  return c;
}

// Equal stages: 1F1B's textbook (m + p - 1) (f + b), and GPipe's the same.
TEST(PipelineSimulation, EqualStagesGiveTheClosedForm) {
  const parallel::PipelineLayout layout = parallel::PipelineLayout::make(8, 4, 1);
  EXPECT_DOUBLE_EQ(simulate_pipeline(layout, "1f1b", 8, uniform(4, 1.0, 2.0)), (8 + 3) * 3.0);
  EXPECT_DOUBLE_EQ(simulate_pipeline(layout, "gpipe", 8, uniform(4, 1.0, 2.0)), (8 + 3) * 3.0);
}

// The last stage four times the first (the LM head): m x the last stage plus the first's
// forward and backward once, 51, where the closed form's (m + p - 1) x the slowest gives 60.
TEST(PipelineSimulation, AHeavyLastStageSetsThePace) {
  const parallel::PipelineLayout layout = parallel::PipelineLayout::make(4, 2, 1);
  PipelineCosts c;
  c.forward = {1.0, 4.0};
  c.backward = {2.0, 8.0};
  EXPECT_DOUBLE_EQ(simulate_pipeline(layout, "1f1b", 4, c), 4 * 12.0 + 3.0);
}

// Two ranks, two chunks each, two micro-batches: rank 1 runs its last chunk as forward +
// backward units that post both outputs after the backward (worked out in the Note's order:
// rank 0's last backward ends at 15).
TEST(PipelineSimulation, InterleavedUnitsPostAfterTheirBackward) {
  const parallel::PipelineLayout layout = parallel::PipelineLayout::make(4, 2, 2);
  EXPECT_DOUBLE_EQ(simulate_pipeline(layout, "interleaved", 2, uniform(4, 1.0, 2.0)), 15.0);
}

// Messages on every hop, and a tied head's gradient that rank 0 waits for before its last
// backward (one micro-batch over two stages).
TEST(PipelineSimulation, MessagesAndTheTiedHeadGradientDelayTheStep) {
  const parallel::PipelineLayout layout = parallel::PipelineLayout::make(2, 2, 1);
  PipelineCosts c = uniform(2, 1.0, 2.0);
  EXPECT_DOUBLE_EQ(simulate_pipeline(layout, "1f1b", 1, c), 6.0);
  c.message_s = 0.5;  // F0 1, F1 1.5-2.5, B1 2.5-4.5, B0 5-7
  EXPECT_DOUBLE_EQ(simulate_pipeline(layout, "1f1b", 1, c), 7.0);
  c.tied = true;
  c.weight_s = 2.0;     // the last rank starts at 2: F1 2-3, B1 3-5
  c.head_grad_s = 1.0;  // back at 6, after the gradient (5.5): B0 6-8
  EXPECT_DOUBLE_EQ(simulate_pipeline(layout, "1f1b", 1, c), 8.0);
}

TEST(PipelineSimulation, CostsForTheWrongNumberOfChunksAreAnError) {
  const parallel::PipelineLayout layout = parallel::PipelineLayout::make(4, 2, 2);
  EXPECT_THROW(simulate_pipeline(layout, "interleaved", 2, uniform(2, 1.0, 2.0)), std::exception);
}

}  // namespace
}  // namespace trident::planner
