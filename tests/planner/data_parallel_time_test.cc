// Data-parallel and ZeRO traffic by stage, micro-batch and convention (Note [Overlapped
// data-parallel traffic] in planner/data_parallel_time.h), and the conventions themselves
// (Note [Framework conventions] in planner/convention.h).
#include "planner/data_parallel_time.h"

#include <gtest/gtest.h>

#include "planner/cluster.h"
#include "planner/convention.h"
#include "planner/memory_model.h"
#include "planner/plan.h"
#include "planner/time_model.h"
#include "support/planner_runs.h"

namespace trident::planner {
namespace {

Convention named(const std::string& name, DType compute = DType::kBF16) {
  return convention_named(name, compute, "none").value();
}

// Four micro-batches of 1 s forward and 2 s backward, 8 gradient buckets, 5 ZeRO-3 parts.
MicroBatchPhases four_micro_batches() {
  MicroBatchPhases p;
  p.forward_s = 1.0;
  p.backward_s = 2.0;
  p.micro_batches = 4.0;
  p.grad_buckets = 8.0;
  p.parts = 5.0;
  return p;
}

TEST(DataParallelTime, ABucketedCollectiveHidesAllButItsLastBucket) {
  EXPECT_DOUBLE_EQ(exposed_behind(1.0, 10.0, 4.0, 1.0), 0.25);  // compute outlasts it
  EXPECT_DOUBLE_EQ(exposed_behind(1.0, 0.4, 4.0, 1.0), 0.7);    // 0.3 of it hidden
  EXPECT_DOUBLE_EQ(exposed_behind(1.0, 10.0, 4.0, 0.0), 1.0);   // nothing overlaps
  EXPECT_DOUBLE_EQ(exposed_behind(1.0, 10.0, 1.0, 1.0), 1.0);   // one bucket: issued at the end
  EXPECT_DOUBLE_EQ(exposed_behind(0.0, 10.0, 4.0, 1.0), 0.0);
}

// Stages 0-1 reduce in the last micro-batch only, 2-3 in every one, as the trainer does;
// stages 1-2 gather the stepped parameters once, exposed; ZeRO-3 gathers twice a micro-batch.
TEST(DataParallelTime, EachStageRunsItsCollectivesWhereTheTrainerDoes) {
  const DataParallelCollectives c{2.0, 1.0};
  const MicroBatchPhases p = four_micro_batches();
  const Convention trident = named("trident");
  EXPECT_DOUBLE_EQ(data_parallel_time(0, c, p, trident, 0.0).total_s, 2.0);
  EXPECT_DOUBLE_EQ(data_parallel_time(1, c, p, trident, 0.0).total_s, 3.0);
  EXPECT_DOUBLE_EQ(data_parallel_time(2, c, p, trident, 0.0).total_s, 4 * 2.0 + 1.0);
  EXPECT_DOUBLE_EQ(data_parallel_time(3, c, p, trident, 0.0).total_s, 4 * (2 * 1.0 + 2.0));
  for (int z = 0; z < 4; ++z)  // no overlap: all of it exposed
    EXPECT_DOUBLE_EQ(data_parallel_time(z, c, p, trident, 0.0).exposed_s, data_parallel_time(z, c, p, trident, 0.0).total_s);
  // Full overlap: the reductions hide behind their backwards but for the last bucket; the
  // gather after the step stays exposed.
  EXPECT_DOUBLE_EQ(data_parallel_time(0, c, p, trident, 1.0).exposed_s, exposed_behind(2.0, 2.0, 8.0, 1.0));
  EXPECT_DOUBLE_EQ(data_parallel_time(1, c, p, trident, 1.0).exposed_s, exposed_behind(2.0, 2.0, 8.0, 1.0) + 1.0);
  EXPECT_DOUBLE_EQ(data_parallel_time(2, c, p, trident, 1.0).exposed_s, 4 * exposed_behind(2.0, 2.0, 8.0, 1.0) + 1.0);
  // ZeRO-3: each forward's gathers behind it, each backward's gathers and reduce-scatter behind it.
  EXPECT_DOUBLE_EQ(data_parallel_time(3, c, p, trident, 1.0).exposed_s,
                   4 * (exposed_behind(1.0, 1.0, 5.0, 1.0) + exposed_behind(3.0, 2.0, 8.0, 1.0)));
}

// Megatron overlaps nothing and reduces once; DeepSpeed overlaps only stage 3 (overlap_comm's
// default); FSDP overlaps everything.
TEST(DataParallelTime, ConventionsOverlapWhatTheirFrameworksOverlap) {
  const DataParallelCollectives c{2.0, 1.0};
  const MicroBatchPhases p = four_micro_batches();
  const DataParallelTime megatron = data_parallel_time(2, c, p, named("megatron"), 1.0);
  EXPECT_DOUBLE_EQ(megatron.total_s, 3.0);
  EXPECT_DOUBLE_EQ(megatron.exposed_s, 3.0);
  const Convention deepspeed = named("deepspeed");
  EXPECT_DOUBLE_EQ(data_parallel_time(2, c, p, deepspeed, 1.0).exposed_s, data_parallel_time(2, c, p, deepspeed, 1.0).total_s);
  EXPECT_LT(data_parallel_time(3, c, p, deepspeed, 1.0).exposed_s, data_parallel_time(3, c, p, deepspeed, 1.0).total_s);
  EXPECT_LT(data_parallel_time(2, c, p, named("fsdp"), 1.0).exposed_s, data_parallel_time(2, c, p, named("fsdp"), 1.0).total_s);
}

// Composer's FSDP1 (backward_prefetch = BACKWARD_POST) gathers each part's parameters for the
// backward only after the part before it has its gradients, and before that part's
// reduce-scatter on the same stream: the gather hides behind nothing, the reduce-scatter behind
// the next part's backward as fsdp's (Note [Gathers after the gradients]). Its dtypes and its
// memory are fsdp's.
TEST(DataParallelTime, GathersAfterTheGradientsAreExposedWhole) {
  const Convention composer = named("composer"), fsdp = named("fsdp");
  EXPECT_TRUE(composer.gathers_after_gradients);
  EXPECT_FALSE(fsdp.gathers_after_gradients);
  EXPECT_EQ(composer.grad_buffer_bytes, fsdp.grad_buffer_bytes);
  EXPECT_EQ(composer.grad_comm_bytes, fsdp.grad_comm_bytes);
  EXPECT_EQ(composer.keeps_compute_shard, fsdp.keeps_compute_shard);
  // Four micro-batches of 10 s forward and 20 s backward, 8 buckets, 5 parts; a reduce-scatter
  // of 2 s and gathers of 1 s a micro-batch.
  MicroBatchPhases p = four_micro_batches();
  p.forward_s = 10.0;
  p.backward_s = 20.0;
  const DataParallelCollectives c{2.0, 1.0};
  // Each micro-batch: the forward's first part's gather (0.2 s), the backward's gathers whole
  // (1 s) and the reduce-scatter's last bucket (0.25 s); fsdp hides the backward's gathers but
  // the last bucket of the two (3 / 8 s).
  EXPECT_DOUBLE_EQ(data_parallel_time(3, c, p, composer, 1.0).exposed_s, 4 * (0.2 + 1.0 + 0.25));
  EXPECT_DOUBLE_EQ(data_parallel_time(3, c, p, fsdp, 1.0).exposed_s, 4 * (0.2 + 0.375));
  EXPECT_DOUBLE_EQ(data_parallel_time(3, c, p, composer, 1.0).total_s, 4 * (2 * 1.0 + 2.0));
  // Without overlap the two agree: everything exposed.
  EXPECT_DOUBLE_EQ(data_parallel_time(3, c, p, composer, 0.0).exposed_s, 4 * (1.0 + 1.0 + 2.0));
  EXPECT_DOUBLE_EQ(data_parallel_time(3, c, p, fsdp, 0.0).exposed_s, 4 * (1.0 + 1.0 + 2.0));
  // Stages 0-2 have no backward gathers: as fsdp.
  for (int z = 0; z < 3; ++z)
    EXPECT_DOUBLE_EQ(data_parallel_time(z, c, p, composer, 1.0).exposed_s,
                     data_parallel_time(z, c, p, fsdp, 1.0).exposed_s);
}

TEST(Convention, GradientDtypesAreTheFrameworksDefaults) {
  EXPECT_EQ(named("trident").grad_buffer_bytes, 4.0);
  EXPECT_EQ(convention_named("trident", DType::kBF16, "bf16").value().grad_comm_bytes, 2.0);
  EXPECT_EQ(named("megatron", DType::kBF16).grad_comm_bytes, 4.0);  // accumulate_allreduce_grads_in_fp32
  EXPECT_EQ(named("megatron", DType::kF16).grad_comm_bytes, 2.0);
  EXPECT_EQ(named("fsdp").grad_buffer_bytes, 4.0);                  // reduce_dtype = float32
  EXPECT_EQ(named("deepspeed", DType::kBF16).grad_buffer_bytes, 2.0);
  EXPECT_EQ(named("deepspeed", DType::kF32).grad_buffer_bytes, 4.0);
  const auto bad = convention_named("colossal", DType::kBF16, "none");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("'colossal'"), std::string::npos);
  EXPECT_NE(bad.status().message().find("trident, megatron, fsdp, composer, deepspeed"),
            std::string::npos);
}

// 16-bit gradient buffers are half the trainer's fp32 ones, every stage and layout; nothing
// else moves.
TEST(Convention, SixteenBitGradientBuffersHalveTheGradientMemory) {
  RunSpec run = testing::gpt_run(4, 256, 4, 256, 8, DType::kBF16);
  Layout l;
  l.dp = 2;
  l.zero_stage = 2;
  l.micro_batch = 2;
  l.accum = 2;
  const MemoryEstimate fp32 = predict_memory(run, l, true);
  run.convention = named("deepspeed");
  const MemoryEstimate half = predict_memory(run, l, true);
  for (size_t k = 0; k < kNumMemoryCategories; ++k) {
    if (k == static_cast<size_t>(MemoryCategory::kGradient))
      EXPECT_NEAR(static_cast<double>(half.peak_bytes[k]), 0.5 * static_cast<double>(fp32.peak_bytes[k]), 1.0);
    else
      EXPECT_EQ(half.peak_bytes[k], fp32.peak_bytes[k]);
  }
}

// FSDP's fp32 shard is its parameter: under ZeRO-3 and mixed precision no compute-dtype shard
// sits beside the masters the optimizer category counts; nothing else moves, and in fp32 (one
// copy either way) or below ZeRO-3 nothing at all.
TEST(Convention, FsdpKeepsNoComputeDtypeShard) {
  for (DType dtype : {DType::kBF16, DType::kF32})
    for (int64_t zero : {2, 3}) {
      RunSpec run = testing::gpt_run(4, 256, 4, 256, 8, dtype);
      Layout l;
      l.dp = 2;
      l.zero_stage = zero;
      l.micro_batch = 2;
      l.accum = 2;
      const MemoryEstimate own = predict_memory(run, l, true);
      run.convention = named("fsdp");
      const MemoryEstimate fsdp = predict_memory(run, l, true);
      const auto p = static_cast<size_t>(MemoryCategory::kParameter);
      const bool dropped = dtype == DType::kBF16 && zero == 3;
      EXPECT_GT(own.peak_bytes[p], 0);
      EXPECT_EQ(fsdp.peak_bytes[p], dropped ? 0 : own.peak_bytes[p]) << zero;
      for (size_t k = 0; k < kNumMemoryCategories; ++k) {
        if (k == p) continue;
        EXPECT_EQ(fsdp.peak_bytes[k], own.peak_bytes[k]) << k;
      }
    }
}

// allocator_headroom: a layout fits only with room for the allocator beside its tensors.
TEST(Convention, AllocatorHeadroomIsKeptFreeOfTensors) {
  Cluster c;
  c.device.memory_gib = 1.0;
  const int64_t gib = int64_t{1} << 30;
  EXPECT_TRUE(c.device_fits(gib));
  c.device.allocator_headroom = 0.05;
  EXPECT_FALSE(c.device_fits(gib));
  EXPECT_TRUE(c.device_fits(static_cast<int64_t>(static_cast<double>(gib) / 1.05)));
}

// Megatron's pipeline messages across nodes: 1/tp of each activation on each rank's card.
TEST(Convention, MegatronScattersPipelineMessagesAcrossNodes) {
  RunSpec run = testing::gpt_run(8, 4096, 32, 2048, 64, DType::kF16);
  run.place_on_device();
  const Cluster gpus = testing::shipped_cluster("dgx-a100-80gb.toml", 4);
  Layout l;
  l.dp = 1;
  l.tp = 8;
  l.pp = 4;  // 32 ranks: stages on different nodes
  l.micro_batch = 1;
  l.accum = 64;
  run.convention = named("trident", DType::kF16);
  const double whole = predict_time(run, l, gpus).comm_total_s;
  run.convention = named("megatron", DType::kF16);
  const double scattered = predict_time(run, l, gpus).comm_total_s;
  // Of the messages' 2 m whole sends at the network's rate, most is saved (the tensor-parallel
  // all-reduces stay).
  const double message = 2048.0 * 4096.0 * 2.0 / (gpus.inter.bandwidth_gbs * 1e9) + gpus.inter.latency_us * 1e-6;
  EXPECT_LT(scattered, whole - 0.6 * 2.0 * 64.0 * message);
  l.sequence_parallel = true;  // split already: nothing changes
  run.convention = named("trident", DType::kF16);
  const double sp = predict_time(run, l, gpus).comm_total_s;
  run.convention = named("megatron", DType::kF16);
  EXPECT_DOUBLE_EQ(predict_time(run, l, gpus).comm_total_s, sp);
}

}  // namespace
}  // namespace trident::planner
