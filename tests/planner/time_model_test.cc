// The time model's fused loss (Note [The fused loss's time] in planner/time_model.cc): a
// tensor-parallel-free last stage pays log-sum-exp and softmax - onehot per logit, at the
// calibrated rate or, uncalibrated, three passes over the logits at the memory's rate; a
// vocabulary-parallel head pays its own passes instead. Data-parallel traffic hides behind the
// last micro-batch's backward bucket by bucket, at the cluster's overlap fraction. The step's
// parts (what `plan --explain` prints) add up to it; the head runs at its chunks' rows and a
// mixture's experts at the rows routed to them (Note [GEMMs by shape]).
#include <gtest/gtest.h>

#include <cmath>

#include "models/registry.h"
#include "ops/loss.h"
#include "planner/time_model.h"

#include "planner/collective_skew.h"
#include "planner/convention.h"
#include "support/planner_runs.h"

namespace trident::planner {
namespace {

// The planner's `small` GPT-2: 6 layers, width 512, 8 heads, T = 512, 4 sequences per step.
RunSpec gpt_small(DType dtype) { return testing::gpt_run(6, 512, 8, 512, 4, dtype); }

Layout one_rank(int64_t micro_batch, int64_t accum) {
  Layout l;
  l.micro_batch = micro_batch;
  l.accum = accum;
  return l;
}

TEST(TimeModel, TheFusedLossCostsItsPassesPerLogit) {
  const RunSpec run = gpt_small(DType::kBF16);
  const double logits_per_step = 4.0 * 512.0 * static_cast<double>(run.model.vocab_size);
  Cluster c;
  c.device.memory_bandwidth_gbs = 50.0;
  for (const Layout& l : {one_rank(4, 1), one_rank(1, 4)}) {
    SCOPED_TRACE(l.str());
    c.device.fused_loss_ns_per_logit = 0.0;
    const double uncalibrated = predict_time(run, l, c).step_s();
    c.device.fused_loss_ns_per_logit = 1.0;
    const double one_ns = predict_time(run, l, c).step_s();
    c.device.fused_loss_ns_per_logit = 3.0;
    const double three_ns = predict_time(run, l, c).step_s();
    // Linear in the rate, every logit of the step once.
    EXPECT_NEAR(three_ns - one_ns, 2.0 * logits_per_step * 1e-9, 1e-9);
    // Uncalibrated: three passes over the bf16 logits at 50 GB/s, 0.12 ns per logit.
    EXPECT_NEAR(one_ns - uncalibrated, logits_per_step * (1.0 - 3.0 * 2.0 / 50.0) * 1e-9, 1e-9);
  }
}

TEST(TimeModel, AVocabularyParallelHeadPaysItsOwnPassesNotTheFusedLoss) {
  const RunSpec run = gpt_small(DType::kF32);
  Layout l = one_rank(4, 1);
  l.tp = 2;
  Cluster c;
  c.shape.devices_per_node = 2;
  c.device.vocab_loss_ns_per_logit = 1.0;
  c.device.fused_loss_ns_per_logit = 0.0;
  const double without = predict_time(run, l, c).step_s();
  c.device.fused_loss_ns_per_logit = 5.0;
  EXPECT_EQ(predict_time(run, l, c).step_s(), without);
}

// Per micro-batch beyond the fused loss's logits (the same in all): under mixed precision the
// fold of every gradient into the f32 ones (2 + 8 bytes per parameter in bf16), and the
// head's f32 dw zeroed, scaled and cast (16 + 2 bytes per weight); in fp32 the dw's 12 and
// the gradients added into their sum (12 bytes per parameter: AccumulateGrad). In both the
// tied embedding's dense gradient written (4 bytes per weight) and the head's dw added to it
// (12): Note [The embedding's dense gradient].
TEST(TimeModel, EachMicroBatchFoldsTheGradientsAndPassesOverTheHeadsDw) {
  Cluster c;
  c.device.memory_bandwidth_gbs = 50.0;
  c.device.fused_loss_ns_per_logit = 1.0;
  for (const DType dtype : {DType::kBF16, DType::kF32}) {
    const RunSpec run = gpt_small(dtype);
    const double P = static_cast<double>(run.shapes.num_parameters());
    const double VC = static_cast<double>(run.shapes.head_matmul.first * run.shapes.head_matmul.second);
    const double per_micro_batch =
        (dtype == DType::kBF16 ? (10.0 * P + 18.0 * VC) / 50e9 : 12.0 * (P + VC) / 50e9) + 16.0 * VC / 50e9;
    const double three_more = predict_time(run, one_rank(1, 4), c).step_s() - predict_time(run, one_rank(4, 1), c).step_s();
    EXPECT_NEAR(three_more, 3.0 * per_micro_batch, 1e-9) << dtype_name(dtype);
  }
}

// Note [Gradient passes a micro-batch]: per micro-batch and parameter in bf16 under ZeRO-3 on
// 8 ranks, the trainer folds 10 bytes, FSDP1 (composer) 18 (the flat gradient, its fp32 cast,
// the predivide) and FSDP2 (fsdp) 6 + 8 (the copy-in, each gather's copy-out); the sharded
// frameworks add the reduced shard into its gradient after the first micro-batch (12 bytes of
// a 1/8 shard). Under ZeRO-2 FSDP2 gathers once; reducing in bf16 neither casts; on one rank
// FSDP1 does not divide; in fp32 both move 4-byte elements; under ZeRO-0 both fold as the
// trainer does.
TEST(TimeModel, EachFrameworkPassesOverTheGradientsAsItsCodeDoes) {
  Cluster gpus = local_cluster(8);
  gpus.device.kind = "gpu";
  gpus.device.memory_bandwidth_gbs = 2000.0;
  struct Case {
    const char* convention;
    const char* reduce;
    DType dtype;
    int64_t zero_stage, dp;
    double bytes, shard_bytes;
  };
  const Case cases[] = {
      {"trident", "none", DType::kBF16, 3, 8, 10.0, 0.0},
      {"composer", "none", DType::kBF16, 3, 8, 18.0, 12.0},
      {"fsdp", "none", DType::kBF16, 3, 8, 14.0, 12.0},
      {"fsdp", "none", DType::kBF16, 2, 8, 10.0, 12.0},
      {"composer", "bf16", DType::kBF16, 3, 8, 8.0, 12.0},
      {"composer", "none", DType::kBF16, 3, 1, 10.0, 12.0},
      {"fsdp", "none", DType::kF32, 3, 8, 24.0, 12.0},
      {"composer", "none", DType::kBF16, 0, 8, 10.0 + 8.0 / 4.0, 0.0},
      {"fsdp", "bf16", DType::kBF16, 3, 8, 12.0, 12.0},
      {"composer", "none", DType::kF32, 3, 8, 16.0, 12.0},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(std::string(k.convention) + " " + k.reduce + " " + dtype_name(k.dtype) + " zero" +
                 std::to_string(k.zero_stage) + " dp" + std::to_string(k.dp));
    RunSpec run = testing::gpt_run(12, 768, 12, 1024, 8 * k.dp, k.dtype);
    run.place_on_device();
    run.convention = convention_named(k.convention, k.dtype, k.reduce).value();
    Layout l;
    l.dp = k.dp;
    l.micro_batch = 2;
    l.accum = 4;
    l.zero_stage = k.zero_stage;
    const double P = static_cast<double>(run.shapes.num_parameters());
    const double shard = P / static_cast<double>(k.dp);
    EXPECT_NEAR(predict_time(run, l, gpus).parts.accumulate,
                (4.0 * k.bytes * P + 3.0 * k.shard_bytes * shard) / 2000e9, 1e-12);
  }
}

// Sharded FSDP reduce-scatters part by part, whatever the trainer's bucket size; the trainer's
// ZeRO-2 bucket by bucket.
TEST(TimeModel, ShardedFsdpReducesPartByPartNotBucketByBucket) {
  RunSpec run = testing::gpt_run(12, 768, 12, 1024, 64, DType::kBF16);
  run.place_on_device();
  Cluster gpus = local_cluster(8);
  gpus.device.kind = "gpu";
  gpus.device.comm_overlap = 1.0;
  gpus.intra.bandwidth_gbs = 20.0;  // traffic comparable to the backward: the bucketing shows
  Layout l;
  l.dp = 8;
  l.micro_batch = 8;
  l.zero_stage = 2;
  auto exposed = [&](const char* convention, int64_t bucket_bytes) {
    run.convention = convention_named(convention, DType::kBF16, "none").value();
    run.bucket_bytes = bucket_bytes;
    return predict_time(run, l, gpus).dp_exposed_s;
  };
  EXPECT_EQ(exposed("fsdp", 1 << 20), exposed("fsdp", 100 << 20));
  EXPECT_NE(exposed("trident", 1 << 20), exposed("trident", 100 << 20));
}

// On CPU ranks ZeRO-Offload changes nothing (the host is where the state was): the same time.
TEST(TimeModel, OffloadOnCpuRanksCostsWhatTheLayoutWithoutItCosts) {
  const RunSpec run = gpt_small(DType::kBF16);
  Layout plain = one_rank(1, 4), offloaded = plain;
  offloaded.offload = true;
  const Cluster c;  // this machine's kind: cpu
  EXPECT_EQ(predict_time(run, offloaded, c).step_s(), predict_time(run, plain, c).step_s());
}

// Note [Overlapped data-parallel traffic]: the last micro-batch's backward hides the gradients'
// collectives bucket by bucket, all but the last bucket's; more micro-batches hide no more.
TEST(TimeModel, DataParallelTrafficHidesBehindTheLastMicroBatchsBackwardBucketByBucket) {
  RunSpec run = testing::gpt_run(12, 768, 12, 1024, 64, DType::kBF16);  // 124M: 498 MB of f32 gradients
  run.place_on_device();
  run.bucket_bytes = 25 << 20;
  Cluster gpus = local_cluster(8);
  gpus.device.kind = "gpu";
  gpus.device.peak_tflops_bf16 = 300.0;
  gpus.device.memory_bandwidth_gbs = 2000.0;
  gpus.intra.bandwidth_gbs = 1.0;  // slow enough that the traffic outlasts a backward
  Layout l;
  l.dp = 8;
  l.micro_batch = 1;
  l.accum = 8;
  auto exposed = [&](double overlap, const Layout& layout) {
    gpus.device.comm_overlap = overlap;
    const TimeEstimate t = predict_time(run, layout, gpus);
    return std::pair{t.exposed_comm_s, t.comm_total_s};
  };
  const auto [none, total] = exposed(0.0, l);
  EXPECT_DOUBLE_EQ(none, total) << "no overlap: all of it exposed";
  const auto [some, total_again] = exposed(1.0, l);
  EXPECT_LT(some, total);
  EXPECT_GT(some, total * 0.5) << "one micro-batch's backward hides little of 8 steps' worth of traffic here";
  // Four times the micro-batches: the same traffic, the same last backward to hide it behind.
  Layout more = l;
  more.accum = 32;
  run.global_batch = 256;
  EXPECT_NEAR(exposed(1.0, more).first, some, 1e-12 * some);
  // Fast links: what is left exposed is the last bucket's share, 1 / 19 of it (498 MB / 25 MiB).
  gpus.intra.bandwidth_gbs = 1000.0;
  run.global_batch = 64;
  const double buckets = std::ceil(4.0 * static_cast<double>(run.shapes.num_parameters()) / (25 << 20));
  EXPECT_EQ(buckets, 19.0);
  const auto [last, fast_total] = exposed(1.0, l);
  EXPECT_NEAR(last, fast_total / buckets, 1e-9 * fast_total);
}

RunSpec tiny_moe() { return testing::tiny_moe_run(); }

TEST(TimeModel, TheStepsPartsAddUpToItsComputeAndItsCommunication) {
  Cluster c = local_cluster(4);
  c.device.gemm_half_rows = 100.0;
  c.device.gemm_half_k = 20.0;
  c.device.fused_loss_ns_per_logit = 1.0;
  c.device.vocab_loss_ns_per_logit = 2.0;
  c.device.collective_skew_us = 300.0;
  c.device.collective_skew_fraction = 0.02;
  std::vector<std::pair<RunSpec, Layout>> cases;
  for (const char* ckpt : {"none", "selective", "full"})
    for (const auto& [mb, accum] : std::vector<std::pair<int64_t, int64_t>>{{4, 1}, {1, 4}}) {
      Layout l = one_rank(mb, accum);
      l.checkpointing = ckpt;
      cases.emplace_back(gpt_small(DType::kBF16), l);
      cases.emplace_back(tiny_moe(), l);
      // On 4 ranks: tp 2, and 2 x pp 2 (ZeRO-1) or 2 x ep 2 over two micro-batches of one.
      Layout tp = l, pp = l, ep = l;
      tp.tp = 2;
      cases.emplace_back(gpt_small(DType::kF32), tp);
      for (Layout* two : {&pp, &ep}) {
        two->dp = 2;
        two->micro_batch = 1;
        two->accum = 2;
      }
      pp.pp = 2;
      pp.zero_stage = 1;
      cases.emplace_back(gpt_small(DType::kF32), pp);
      ep.ep = 2;
      cases.emplace_back(tiny_moe(), ep);
    }
  for (const auto& [run, l] : cases) {
    SCOPED_TRACE(l.str() + (run.shapes.experts > 0 ? " tiny-moe" : " gpt small"));
    const TimeEstimate t = predict_time(run, l, c);
    EXPECT_NEAR(t.parts.total(), t.compute_s, 1e-12 * t.compute_s);
    EXPECT_NEAR(t.parts.recompute, t.recompute_s, 1e-12 * t.compute_s);
    EXPECT_NEAR(t.dp_exposed_s + t.tp_s + t.ep_s + t.skew_s + t.pp_exposed_s, t.exposed_comm_s,
                1e-12 * t.step_s());
    EXPECT_GT(t.parts.head, 0.0);
    EXPECT_GT(t.parts.products, 0.0);
    EXPECT_GT(t.parts.optimizer, 0.0);
    EXPECT_EQ(t.parts.experts > 0.0, run.shapes.experts > 0);
    EXPECT_EQ(t.parts.recompute > 0.0, l.checkpointing != "none");
    EXPECT_EQ(t.tp_s > 0.0, l.tp > 1);
    EXPECT_EQ(t.ep_s > 0.0, l.ep > 1);
    EXPECT_EQ(t.skew_s > 0.0, l.tp > 1 || l.ep > 1);
  }
}

// With tp = 1 the fused loss runs the head's three products on chunks of rows (1,024 of GPT-2's
// vocabulary on a CPU): their rate is the chunk's rows', not the micro-batch's.
TEST(TimeModel, TheHeadRunsAtItsChunksRows) {
  const RunSpec run = gpt_small(DType::kF32);  // 2,048 tokens a micro-batch at b4
  const double R = static_cast<double>(ops::linear_cross_entropy_chunk_rows(run.model.vocab_size, false));
  ASSERT_EQ(R, 1024.0);
  Cluster c;
  c.device.peak_tflops_fp32 = 1.0;
  c.device.gemm_half_rows = 256.0;
  const double flops = 3.0 * 2.0 * 2048.0 * static_cast<double>(run.shapes.head_matmul.first * run.shapes.head_matmul.second);
  EXPECT_NEAR(predict_time(run, one_rank(4, 1), c).parts.head, flops / (1e12 * R / (R + 256.0)), 1e-9);
  // One sequence of 512 rows is one chunk of its own rows.
  EXPECT_NEAR(predict_time(run, one_rank(1, 4), c).parts.head, flops / (1e12 * 512.0 / (512.0 + 256.0)), 1e-9);
}

// Each expert's products are GEMMs of the rows routed to it: N k / E of a micro-batch's N tokens
// with balanced routing, ep N k / E under expert parallelism (its ep ranks' rows).
TEST(TimeModel, ExpertsRunAtTheRowsRoutedToThem) {
  const RunSpec run = tiny_moe();
  Cluster c = local_cluster(2);
  c.device.peak_tflops_fp32 = 1.0;
  c.device.gemm_half_rows = 256.0;
  // k = 2 rows per token through gate, up (256 -> 512) and down (512 -> 256): forward, dx, dW.
  const double per_token = 2.0 * 3.0 * 2.0 * 3.0 * 256.0 * 512.0;
  auto experts = [&](const Layout& l, double rows) {
    const double tokens = static_cast<double>(l.micro_batch * l.accum) * 256.0;
    return 4.0 * tokens * per_token / (1e12 * rows / (rows + 256.0));  // 4 sparse layers
  };
  const Layout b8 = one_rank(8, 1);
  EXPECT_NEAR(predict_time(run, b8, c).parts.experts, experts(b8, 2048.0 * 2.0 / 4.0), 1e-9);
  const Layout b1 = one_rank(1, 8);
  EXPECT_NEAR(predict_time(run, b1, c).parts.experts, experts(b1, 256.0 * 2.0 / 4.0), 1e-9);
  Layout ep = one_rank(4, 1);
  ep.ep = 2;
  EXPECT_NEAR(predict_time(run, ep, c).parts.experts, experts(ep, 1024.0 * 2.0 * 2.0 / 4.0), 1e-9);
}

// The exchanges are priced at the link's all_to_all_factor over the model's time (Note
// [Collectives as measured]): tripled with it, and nothing else moved.
TEST(TimeModel, ExpertExchangesTakeTheLinksAllToAllFactor) {
  const RunSpec run = tiny_moe();
  Cluster c = local_cluster(2);
  Layout ep = one_rank(4, 1);
  ep.ep = 2;
  const TimeEstimate one = predict_time(run, ep, c);
  ASSERT_GT(one.ep_s, 0.0);
  c.intra.all_to_all_factor = 3.0;
  c.inter.all_to_all_factor = 3.0;
  const TimeEstimate three = predict_time(run, ep, c);
  EXPECT_NEAR(three.ep_s, 3.0 * one.ep_s, 1e-12);
  EXPECT_NEAR(three.step_s() - one.step_s(), 2.0 * one.ep_s, 1e-12);
  EXPECT_EQ(three.parts.experts, one.parts.experts);
}

// Note [The ranks' skew at a blocking collective]: each blocking collective of tensor
// parallelism and exchange of expert parallelism waits for the group's slowest rank, a group of
// n ranks E[max of n normals] / E[max of 2] as long as 2 (an assumption: only 2 ranks were
// measured); data parallelism's and ZeRO's collectives and a pipeline's messages are not
// counted.
TEST(TimeModel, BlockingCollectivesWaitForTheSlowestRank) {
  EXPECT_DOUBLE_EQ(expected_max_of_normals(1.0), 0.0);
  EXPECT_NEAR(expected_max_of_normals(2.0), 0.5642, 1e-4);
  EXPECT_NEAR(expected_max_of_normals(8.0), 1.4236, 1e-4);
  EXPECT_NEAR(expected_max_of_normals(1024.0), 3.2482, 1e-4);
  EXPECT_NEAR(expected_max_of_normals(3.0), 0.8463, 0.01);  // between powers of two: within 1%
  EXPECT_GT(expected_max_of_normals(6.0), expected_max_of_normals(4.0));
  EXPECT_LT(expected_max_of_normals(6.0), expected_max_of_normals(8.0));
  EXPECT_GT(expected_max_of_normals(4096.0), expected_max_of_normals(1024.0));
  Cluster c = local_cluster(4);
  c.device.collective_skew_us = 1000.0;  // 1 ms a collective, whatever the segment
  // GPT-2's 6 blocks under tp: 4 all-reduces a block, the embedding's, the head's input's and
  // the loss's two, per micro-batch: 28 x 4 micro-batches.
  Layout tp = one_rank(1, 4);
  tp.tp = 2;
  EXPECT_NEAR(predict_time(gpt_small(DType::kF32), tp, c).skew_s, 4 * 28 * 1e-3, 1e-12);
  tp.tp = 4;
  EXPECT_NEAR(predict_time(gpt_small(DType::kF32), tp, c).skew_s, 4 * 28 * 1e-3 * 1.0294 / 0.5642,
              1e-4);
  // Sequence parallelism: each block's all-reduce an all-gather and a reduce-scatter.
  tp.tp = 2;
  tp.sequence_parallel = true;
  EXPECT_NEAR(predict_time(gpt_small(DType::kF32), tp, c).skew_s, 4 * (6 * 8 + 4) * 1e-3, 1e-12);
  tp.sequence_parallel = false;
  // tiny-moe's 4 sparse blocks under ep: 4 exchanges each per micro-batch, 6 with a rerun.
  Layout ep = one_rank(2, 2);
  ep.ep = 2;
  EXPECT_NEAR(predict_time(tiny_moe(), ep, c).skew_s, 2 * 16 * 1e-3, 1e-12);
  ep.checkpointing = "full";
  EXPECT_NEAR(predict_time(tiny_moe(), ep, c).skew_s, 2 * 24 * 1e-3, 1e-12);
  Layout dp = one_rank(1, 4), pp = one_rank(1, 4);
  dp.dp = 2;
  pp.pp = 2;
  EXPECT_EQ(predict_time(gpt_small(DType::kF32), dp, c).skew_s, 0.0);
  EXPECT_EQ(predict_time(gpt_small(DType::kF32), pp, c).skew_s, 0.0);
  // The part that grows with the segment: the whole stage's compute per micro-batch, once per
  // collective's segment, so the sum is the fraction of the compute.
  c.device.collective_skew_us = 0.0;
  c.device.collective_skew_fraction = 0.05;
  tp.tp = 2;
  const TimeEstimate t = predict_time(gpt_small(DType::kF32), tp, c);
  EXPECT_GT(t.skew_s, 0.0);
  EXPECT_LT(t.skew_s, 0.05 * t.compute_s);
  // Without a measured skew (the shipped GPU files), nothing.
  EXPECT_EQ(predict_time(gpt_small(DType::kF32), tp, local_cluster(4)).skew_s, 0.0);
}

}  // namespace
}  // namespace trident::planner
