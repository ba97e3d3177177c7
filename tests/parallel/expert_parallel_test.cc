// Expert parallelism (issue #51, parallel/expert_parallel.h): a tiny Mixtral-shaped LLaMA (4
// experts, top-2, load-balancing and z losses) trained with its experts split over ep ranks,
// alone and with data parallelism, ZeRO 1 and 3, tensor parallelism (the experts replicated
// over tp) and pipeline parallelism, gives the single-process run's per-step losses within
// 1e-5 relative. The single process sees the same micro-batches: a batch of B / d rows and d x
// the accumulation (d data-parallel ranks: dp x ep), so that each of its micro-batches is one
// data rank's and the router's losses (nonlinear in a batch's routing) are taken over the same
// rows. Also: a forward's all_to_all_v element counts are the routing's rows, summed over the
// ranks; each rank holds only its experts; a checkpoint saved at one ep size resumes at
// another, and one saved at ep 2 x tp 2 in other layouts.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "models/registry.h"
#include "moe/sparse_moe.h"
#include "parallel/parallelize.h"
#include "support/mpi_training_test.h"

namespace trident::train {
namespace {

class ExpertParallelTest : public testing::MpiTrainingTest {
 protected:
  TrainConfig config(const std::string& out) const {
    TrainConfig cfg = testing::tiny_run_config(dir);
    cfg.model.arch = "llama";
    cfg.model.n_head = 4;
    cfg.model.family_values = {{"n_kv_heads", int64_t{2}},         {"intermediate_size", int64_t{48}},
                               {"num_local_experts", int64_t{4}},  {"num_experts_per_tok", int64_t{2}},
                               {"moe_intermediate_size", int64_t{32}}, {"router_aux_loss_coef", 0.05},
                               {"router_z_loss_coef", 0.01}};
    cfg.data.grad_accum_steps = 2;
    cfg.train.steps = 8;
    cfg.train.eval_interval = 0;
    cfg.train.out_dir = (dir / out).string();
    return cfg;
  }
  // The single process over the same micro-batches as the layout's data-parallel ranks (dp x
  // ep: the world over tp x pp).
  Run single(TrainConfig cfg) {
    const int n = static_cast<int>(world->size() / (cfg.parallel.tp * cfg.parallel.pp));
    cfg.parallel = {};
    cfg.data.batch_size /= n;
    cfg.data.grad_accum_steps *= n;
    cfg.train.out_dir += "_single_rank" + std::to_string(world->rank());
    return train(cfg, nullptr);
  }
};

TEST_F(ExpertParallelTest, LayoutsGiveTheSingleProcessLosses) {
  const int n = world->size();
  if (n < 2) GTEST_SKIP() << "one rank: no expert parallelism";
  struct Layout {
    const char* name;
    int64_t ep, zero;
    const char* checkpointing;
    int64_t tp = 1, pp = 1;
    bool sequence_parallel = false;
  };
  // With tp the experts and router are replicated over the tensor-parallel ranks and see the
  // whole sequence (gathered under sequence parallelism), and the ep groups are the ranks of
  // one tp coordinate.
  const std::vector<Layout> layouts = {{"ep2", 2, 0, "none"},
                                       {"ep2_zero1", 2, 1, "none"},
                                       {"ep2_zero3", 2, 3, "full"},
                                       {"ep4", 4, 0, "none"},
                                       {"ep4_zero1", 4, 1, "selective"},
                                       {"tp2", 1, 0, "none", 2},
                                       {"ep2_tp2", 2, 0, "none", 2},
                                       {"ep2_tp2_zero1", 2, 1, "selective", 2},
                                       {"tp2_sp", 1, 0, "full", 2, 1, true},
                                       {"ep2_tp2_sp_zero3", 2, 3, "none", 2, 1, true},
                                       {"ep2_pp2", 2, 0, "none", 1, 2}};
  for (const Layout& l : layouts) {
    if (n % (l.ep * l.tp * l.pp) != 0 || (l.ep == 1 && l.tp * l.pp == 1)) continue;
    SCOPED_TRACE(l.name);
    TrainConfig cfg = config(l.name);
    cfg.parallel.ep = l.ep;
    cfg.parallel.tp = l.tp;
    cfg.parallel.pp = l.pp;
    cfg.parallel.sequence_parallel = l.sequence_parallel;
    cfg.parallel.zero_stage = l.zero;
    cfg.model.activation_checkpointing = l.checkpointing;
    const Run ref = single(cfg);
    const Run got = train(cfg, world);
    expect_close(got.losses, ref.losses, std::string(l.name) + " (" + std::to_string(n) + " ranks)");
  }
}

TEST_F(ExpertParallelTest, TheExchangeSendsTheRoutedRowsAndEachRankKeepsItsExperts) {
  const int n = world->size();
  if (n < 2) GTEST_SKIP() << "one rank: no expert parallelism";
  TrainConfig cfg = config("counts");
  cfg.parallel.ep = n;
  const std::unique_ptr<models::CausalLM> model = models::build_model(cfg.model);
  auto p = parallel::parallelize(*model, world, Device::cpu(), cfg.parallel, cfg.precision, cfg.optim);
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  // This rank's experts keep their weights, the others' are released.
  const int64_t per_rank = 4 / n;
  for (const auto& [name, t] : model->named_parameters()) {
    const int64_t e = model->expert_of(name);
    if (e < 0) continue;
    EXPECT_EQ(t.numel() > 0, e / per_rank == world->rank()) << name;
  }
  std::vector<moe::SparseMoe*> layers;
  for (const auto& [path, m] : model->named_modules())
    if (auto* moe = dynamic_cast<moe::SparseMoe*>(m)) layers.push_back(moe);
  ASSERT_EQ(layers.size(), 2u);
  const int64_t before = world->stats().of(comm::CommOp::kAllToAllV).elements;
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 3 * 16; ++i) ids.push_back((i * 13 + 7 * world->rank()) % 64);
  {
    autograd::NoGradGuard no_grad;
    (void)model->forward(from_vector(ids, {3, 16}));
  }
  const int64_t sent = world->stats().of(comm::CommOp::kAllToAllV).elements - before;
  // Out: this rank's kept rows; back: the rows its experts received. Over all ranks each row
  // travels twice, C elements each way.
  int64_t rows = 0;
  for (const moe::SparseMoe* l : layers) rows += l->last_routing().rows();
  EXPECT_EQ(rows, 2 * 3 * 16 * 2);  // two layers, 48 tokens, top-2, dropless
  Tensor totals = from_vector(std::vector<double>{static_cast<double>(sent), static_cast<double>(rows)}, {2});
  world->all_reduce(totals);
  const std::vector<double> t = to_vector<double>(totals);
  EXPECT_EQ(t[0], 2.0 * t[1] * static_cast<double>(cfg.model.n_embd));
}

TEST_F(ExpertParallelTest, ACheckpointResumesAtAnotherExpertParallelSize) {
  const int n = world->size();
  if (n < 2) GTEST_SKIP() << "one rank: no expert parallelism";
  // Saved at ep 2 after 4 steps, resumed at ep 1 (pure data parallelism), ep 2 and (on 4
  // ranks) ep 4: the uninterrupted run's losses.
  TrainConfig cfg = config("whole");
  cfg.parallel.ep = 2;
  cfg.train.checkpoint_interval = 4;
  const Run whole = train(cfg, world);
  ASSERT_EQ(whole.losses.size(), 8u);
  for (int64_t ep : {int64_t{1}, int64_t{2}, int64_t{4}}) {
    if (n % ep != 0) continue;
    TrainConfig run = config("resume_ep" + std::to_string(ep));
    run.parallel.ep = 2;
    run.train.checkpoint_interval = 4;
    const Run first = train(run, world, 4);
    ASSERT_EQ(first.losses.size(), 4u);
    run.parallel.ep = ep;
    const Run rest = train(run, world);
    ASSERT_EQ(rest.losses.size(), 4u) << "ep " << ep;
    expect_close(rest.losses, std::vector<double>(whole.losses.begin() + 4, whole.losses.end()),
                 "resumed at ep " + std::to_string(ep));
  }
}

TEST_F(ExpertParallelTest, AnExpertAndTensorParallelCheckpointResumesInOtherLayouts) {
  if (world->size() != 4) GTEST_SKIP() << "needs 4 ranks: ep 2 x tp 2";
  // Saved at ep 2 x tp 2 after 4 steps, resumed at tp 2 alone and at ep 2 x pp 2: two data
  // ranks each, so the same micro-batches, and the uninterrupted run's losses.
  TrainConfig cfg = config("whole_ep2_tp2");
  cfg.parallel.ep = 2;
  cfg.parallel.tp = 2;
  cfg.train.checkpoint_interval = 4;
  const Run whole = train(cfg, world);
  ASSERT_EQ(whole.losses.size(), 8u);
  struct Resumed {
    const char* name;
    int64_t ep, tp, pp;
  };
  for (const Resumed& r : {Resumed{"tp2", 1, 2, 1}, Resumed{"ep2_pp2", 2, 1, 2}}) {
    TrainConfig run = config(std::string("resume_") + r.name);
    run.parallel.ep = 2;
    run.parallel.tp = 2;
    run.train.checkpoint_interval = 4;
    ASSERT_EQ(train(run, world, 4).losses.size(), 4u);
    run.parallel.ep = r.ep;
    run.parallel.tp = r.tp;
    run.parallel.pp = r.pp;
    const Run rest = train(run, world);
    ASSERT_EQ(rest.losses.size(), 4u) << r.name;
    expect_close(rest.losses, std::vector<double>(whole.losses.begin() + 4, whole.losses.end()),
                 std::string("ep2 x tp2 resumed at ") + r.name);
  }
}

}  // namespace
}  // namespace trident::train
