// The planner and the trainer agree on which layouts exist (issue #46): for a LLaMA with
// grouped-query attention (12 query heads over 3 kv heads: tensor parallelism splits into 1,
// 3, 6 or 12 ranks, not 2 or 4, which divide the query heads alone) on 1 to 8 ranks, every
// layout of the ranks (tp, pp, virtual stages, ZeRO stage, sequence parallelism, offload) is
// tried both ways: the planner's enumeration (planner/search.h), and Trainer::create on this
// many ranks, which builds the model and parallelizes it. Every layout the planner lists
// builds; every layout that builds is listed, but for those the planner prunes as unable to
// help (search.h: `prunes`), which the trainer builds too. And for every layout built, the
// planner's placement table (planner/placements.h, from the family's shapes) is the trainer's.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <tuple>

#include "core/check.h"
#include "planner/placements.h"
#include "planner/run_spec.h"
#include "planner/search.h"
#include "support/mpi_training_test.h"

namespace trident::train {
namespace {

using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, bool, bool>;  // tp, pp, v, zero, sp, offload

std::string str(const Key& k) {
  return "tp" + std::to_string(std::get<0>(k)) + " pp" + std::to_string(std::get<1>(k)) + " v" +
         std::to_string(std::get<2>(k)) + " zero" + std::to_string(std::get<3>(k)) + (std::get<4>(k) ? " sp" : "") +
         (std::get<5>(k) ? " offload" : "");
}

// The planner's table (built from the family's shapes) is the trainer's (built by
// parallelize() from the model): every row alike.
void expect_same_table(const parallel::PlacementTable& trainer, const parallel::PlacementTable& planner,
                       const std::string& what) {
  ASSERT_EQ(trainer.params().size(), planner.params().size()) << what;
  EXPECT_EQ(trainer.mesh(), planner.mesh()) << what;
  for (size_t i = 0; i < trainer.params().size(); ++i) {
    const parallel::ParamPlacement& a = trainer.params()[i];
    const parallel::ParamPlacement& b = planner.params()[i];
    EXPECT_EQ(a.name, b.name) << what;
    EXPECT_EQ(a.shape, b.shape) << what << ": " << a.name;
    EXPECT_EQ(a.block, b.block) << what << ": " << a.name;
    for (parallel::MeshAxis axis : parallel::kMeshAxes)
      EXPECT_EQ(a.on_axis(axis), b.on_axis(axis))
          << what << ": " << a.name << " on " << parallel::mesh_axis_name(axis) << ": " << a.on_axis(axis).str()
          << " vs " << b.on_axis(axis).str();
    EXPECT_EQ(a.trainable, b.trainable) << what << ": " << a.name;
    EXPECT_EQ(a.storage, b.storage) << what << ": " << a.name;
    EXPECT_EQ(a.reduce_over, b.reduce_over) << what << ": " << a.name;
    EXPECT_EQ(a.state_sharded, b.state_sharded) << what << ": " << a.name;
  }
}

class LayoutAgreementTest : public testing::MpiTrainingTest {
 protected:
  TrainConfig config() const {
    TrainConfig cfg = testing::tiny_run_config(dir);
    cfg.model.arch = "llama";
    cfg.model.n_layer = 4;
    cfg.model.n_head = 12;
    cfg.model.n_embd = 48;
    cfg.model.family_values = {{"n_kv_heads", int64_t{3}}, {"intermediate_size", int64_t{64}}};
    cfg.data.batch_size = 8 * world->size();  // every data-parallel degree divides it
    cfg.data.grad_accum_steps = 8;            // every pipeline has micro-batches for each stage
    cfg.train.out_dir = (dir / "out").string();
    cfg.train.resume = false;
    return cfg;
  }

  // Every candidate layout of `base` on this job's ranks, tried by the planner and the trainer.
  void agree(const TrainConfig& base);
};

TEST_F(LayoutAgreementTest, PlannerAndTrainerAgreeOnEveryLayout) { agree(config()); }

// LoRA on the attention and down_proj with the base in NF4 (Note [The planner's fine-tuning]):
// the adapters' rows in the table (split with their layers, A before B, frozen base in the
// compute dtype) and the layouts the trainer refuses: k and v's adapters past their 3 heads
// (tp 6 and 12), NF4 under ZeRO-3.
TEST_F(LayoutAgreementTest, PlannerAndTrainerAgreeOnEveryLoraLayout) {
  TrainConfig cfg = config();
  cfg.lora.r = 4;
  cfg.lora.target_modules = "q_proj,k_proj,v_proj,o_proj,down_proj";
  cfg.quantization.base = "nf4";
  agree(cfg);
}

void LayoutAgreementTest::agree(const TrainConfig& base) {
  const int64_t n = world->size();
  // The planner's layouts, as keys.
  planner::RunSpec run = planner::run_spec(base);
  planner::SearchSpace space;
  space.ranks = n;
  space.checkpointing = {"none"};
  space.offload = true;
  std::set<Key> listed;
  for (const planner::Layout& l : planner::enumerate_layouts(run, space))
    listed.insert({l.tp, l.pp, l.virtual_stages, l.zero_stage, l.sequence_parallel, l.offload});
  // The trainer's: every candidate built on these ranks.
  std::set<Key> built;
  int64_t tried = 0;
  for (int64_t tp = 1; tp <= n; ++tp)
    for (int64_t pp = 1; pp <= n; ++pp)
      for (int64_t v = 1; v <= (pp > 1 ? base.model.n_layer : 1); ++v)
        for (int64_t zero = 0; zero <= 3; ++zero)
          for (bool sp : {false, true})
            for (bool offload : {false, true}) {
              TrainConfig cfg = base;
              cfg.parallel.tp = tp;
              cfg.parallel.pp = pp;
              cfg.parallel.virtual_stages = v;
              cfg.parallel.pipeline_schedule = v > 1 ? "interleaved" : "1f1b";
              cfg.parallel.zero_stage = zero;
              cfg.parallel.sequence_parallel = sp;
              cfg.parallel.offload_optimizer = offload;
              const Key key{tp, pp, v, zero, sp, offload};
              ++tried;
              std::unique_ptr<Trainer> trainer;
              try {
                auto t = Trainer::create(cfg, world);
                ASSERT_TRUE(t.is_ok()) << str(key) << ": " << t.status().to_string();
                trainer = std::move(t.value());
                built.insert(key);
              } catch (const Error&) {
                // The trainer refuses it (every rank alike: the same config).
              }
              if (trainer) expect_same_table(trainer->placements(), planner::placements_of(run, planner::layout_of(cfg, n)), str(key));
            }
  for (const Key& k : listed) EXPECT_TRUE(built.contains(k)) << n << " ranks: the planner lists " << str(k)
                                                             << ", which the trainer does not build";
  for (const Key& k : built) {
    if (listed.contains(k)) continue;
    planner::Layout l;
    std::tie(l.tp, l.pp, l.virtual_stages, l.zero_stage, l.sequence_parallel, l.offload) = k;
    l.dp = n / (l.tp * l.pp);
    EXPECT_TRUE(planner::prunes(run, space, l)) << n << " ranks: the trainer builds " << str(k)
                                                << ", which the planner neither lists nor prunes";
  }
  // The model's rule shows: tp 2 and 4 divide the query heads but not the kv heads.
  for (const Key& k : built) EXPECT_TRUE(std::get<0>(k) == 1 || std::get<0>(k) % 3 == 0) << str(k);
  if (world->rank() == 0)
    std::printf("%lld ranks: %lld candidates, %zu built by the trainer, %zu listed by the planner\n",
                static_cast<long long>(n), static_cast<long long>(tried), built.size(), listed.size());
  EXPECT_FALSE(built.empty());
}

}  // namespace
}  // namespace trident::train
