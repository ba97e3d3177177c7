#include "checkpoint/checkpoint_dir.h"

#include <gtest/gtest.h>

#include "checkpoint/atomic_file.h"
#include "checkpoint_test_util.h"
#include "core/views.h"

namespace trident::checkpoint {
namespace {

using testing::Contents;
using testing::expect_contents;
using testing::fails_with;
using testing::hashed_tensor;
using testing::same_tensor;
using testing::sample_contents;
using testing::save;
using testing::ScratchDir;

TEST(CheckpointDir, SaveAndLoad) {
  ScratchDir dir;
  const std::string root = dir / "ckpts";  // created by the writer
  const Contents c = sample_contents(1);
  const std::string path = save(default_env(), root, "step_000100", c).value();
  EXPECT_EQ(path, root + "/step_000100");
  EXPECT_EQ(default_env()->list_dir(root).value(), std::vector<std::string>{"step_000100"});
  EXPECT_EQ(default_env()->list_dir(path).value(),
            (std::vector<std::string>{"DONE", "manifest.json", "model.safetensors",
                                      "optim.safetensors", "state.json"}));

  const CheckpointReader r = CheckpointReader::open(default_env(), path).value();
  EXPECT_EQ(r.manifest().name, "step_000100");
  EXPECT_EQ(r.manifest().metadata.at("name"), "step_000100");
  EXPECT_EQ(r.manifest().files.size(), 3u);
  EXPECT_EQ(r.manifest().tensors.size(), 5u);
  expect_contents(r, c);
  // The model file is a plain safetensors file with its metadata.
  EXPECT_EQ(r.safetensors("model.safetensors").value()->metadata().at("format"), "pt");
  EXPECT_TRUE(fails_with(r.load_tensor("nope").status(), "has no tensor 'nope'"));
  EXPECT_TRUE(fails_with(r.read_file("nope").status(), "has no file 'nope'"));
  // Flat ranges of an unsharded tensor read straight from the file.
  const Tensor flat = views::view(c.model[0].tensor, {44});
  EXPECT_TRUE(
      same_tensor(r.load_flat_range("wte.weight", 5, 31).value(), views::narrow(flat, 0, 5, 26)));
}

TEST(CheckpointDir, WriterRefusesOverwritingAndBadNames) {
  ScratchDir dir;
  const Contents c = sample_contents(1);
  ASSERT_TRUE(save(default_env(), dir.path(), "step_000001", c).is_ok());
  EXPECT_TRUE(fails_with(CheckpointWriter::begin(default_env(), dir.path(), "step_000001").status(),
                         "already exists", "never overwrites"));
  EXPECT_THROW((void)CheckpointWriter::begin(default_env(), dir.path(), ".hidden"), Error);
  EXPECT_THROW((void)CheckpointWriter::begin(default_env(), dir.path(), "a/b"), Error);

  auto w = CheckpointWriter::begin(default_env(), dir.path(), "step_000002").value();
  EXPECT_THROW((void)w.write_file("manifest.json", "x"), Error);
  EXPECT_THROW((void)w.write_file(".x", "x"), Error);
  ASSERT_TRUE(w.write_file("a", "x").is_ok());
  EXPECT_THROW((void)w.write_file("a", "y"), Error);
  ASSERT_TRUE(w.write_safetensors("m.safetensors", c.model).is_ok());
  EXPECT_THROW((void)w.write_safetensors("n.safetensors", c.model), Error);  // names again
}

TEST(CheckpointDir, AbandonedWriterLeavesNothingAndStaleStagingIsReplaced) {
  ScratchDir dir;
  {
    auto w = CheckpointWriter::begin(default_env(), dir.path(), "step_000001").value();
    ASSERT_TRUE(w.write_file("a", "x").is_ok());
    EXPECT_TRUE(is_directory(default_env(), w.staging_dir()));
  }
  EXPECT_TRUE(default_env()->list_dir(dir.path()).value().empty());
  // A staging directory a crash left behind is replaced by the next writer of that name.
  ASSERT_TRUE(create_dirs(default_env(), dir / ".tmp-step_000001").is_ok());
  testing::spit(dir / ".tmp-step_000001/garbage", "left by a crash");
  ASSERT_TRUE(save(default_env(), dir.path(), "step_000001", sample_contents(1)).is_ok());
  EXPECT_EQ(default_env()->list_dir(dir.path()).value(), std::vector<std::string>{"step_000001"});
  EXPECT_FALSE(exists(default_env(), dir / "step_000001/garbage"));
}

// Every way a checkpoint can be damaged is refused, naming the checkpoint, file and problem.
TEST(CheckpointDir, DamagedCheckpointsAreRefused) {
  ScratchDir dir;
  const Contents c = sample_contents(7);
  const std::string good = save(default_env(), dir.path(), "good", c).value();
  struct Case {
    const char* what;
    std::function<void(const std::string& ckpt)> damage;
    std::vector<std::string> message;
    bool needs_checksums = false;
  };
  const std::vector<Case> cases = {
      {"no DONE",
       [](const std::string& p) { std::filesystem::remove(p + "/DONE"); },
       {"is incomplete", "no DONE marker"}},
      {"no manifest",
       [](const std::string& p) { std::filesystem::remove(p + "/manifest.json"); },
       {"manifest.json is missing"}},
      {"missing file",
       [](const std::string& p) { std::filesystem::remove(p + "/state.json"); },
       {"file 'state.json' listed in the manifest is missing"}},
      {"truncated file",
       [](const std::string& p) { testing::truncate_file(p + "/model.safetensors", 100); },
       {"file 'model.safetensors' is 100 bytes, the manifest says", "(truncated)"}},
      {"longer file",
       [](const std::string& p) {
         testing::spit(p + "/state.json", testing::slurp(p + "/state.json") + " ");
       },
       {"file 'state.json' is", "bytes, the manifest says"}},
      {"flipped byte in tensor data",
       [](const std::string& p) {
         const size_t n = testing::slurp(p + "/optim.safetensors").size();
         testing::flip_byte(p + "/optim.safetensors", n - 3);
       },
       {"file 'optim.safetensors' is corrupt: its CRC-32C is", "the manifest says"},
       /*needs_checksums=*/true},
      {"flipped byte in manifest",
       [](const std::string& p) { testing::flip_byte(p + "/manifest.json", 40); },
       {"manifest.json is corrupt: its CRC-32C is", "DONE says"}},
      {"truncated manifest",
       [](const std::string& p) { testing::truncate_file(p + "/manifest.json", 10); },
       {"manifest.json is 10 bytes, DONE says"}},
      {"garbage DONE",
       [](const std::string& p) { testing::spit(p + "/DONE", "{\"x\": 1}"); },
       {"DONE is not a version-1 completion marker"}},
      {"empty DONE",
       [](const std::string& p) { testing::spit(p + "/DONE", ""); },
       {"DONE is not valid JSON"}},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    const std::string ckpt = dir / "damaged";
    std::filesystem::remove_all(ckpt);
    std::filesystem::copy(good, ckpt);
    ASSERT_TRUE(CheckpointReader::open(default_env(), ckpt).is_ok());
    k.damage(ckpt);
    Status s = CheckpointReader::open(default_env(), ckpt).status();
    EXPECT_TRUE(fails_with(s, "checkpoint '" + ckpt + "'"));
    for (const std::string& part : k.message) EXPECT_TRUE(fails_with(s, part));
    // Without checksums a flipped data byte goes unnoticed (the documented trade-off).
    EXPECT_EQ(CheckpointReader::open(default_env(), ckpt, {.verify_checksums = false}).is_ok(),
              k.needs_checksums);
  }
  EXPECT_TRUE(
      fails_with(CheckpointReader::open(default_env(), dir / "absent").status(), "does not exist"));
}

// Issue #5's layout: two "ranks" write their own files into the staging directory; the
// writer lists them and records how each logical tensor is split, then commits.
TEST(CheckpointDir, ShardedTensorsAreAssembledAndPartitioned) {
  ScratchDir dir;
  const Tensor flat_sharded = hashed_tensor({5, 7}, DType::kF32, 1);
  const Tensor box_sharded = hashed_tensor({4, 6}, DType::kBF16, 2);
  const Tensor replicated = hashed_tensor({3}, DType::kI32, 3);
  const Tensor flat_view = views::view(flat_sharded, {35});

  auto w = CheckpointWriter::begin(default_env(), dir.path(), "step_000010").value();
  for (int rank = 0; rank < 2; ++rank) {
    const std::string file = "shard.rank0000" + std::to_string(rank) + ".safetensors";
    const int64_t begin = rank == 0 ? 0 : 12, end = rank == 0 ? 12 : 35;
    std::vector<NamedTensor> mine = {
        {"w.flat", core::clone(views::narrow(flat_view, 0, begin, end - begin))},
        {"b.box", core::clone(views::narrow(box_sharded, 1, 3 * rank, 3))}};
    if (rank == 0) mine.push_back({"r", replicated});
    if (rank == 1) mine.push_back({"z.flat", views::view(box_sharded, {24})});
    // What a rank does on its own, then sends to rank 0.
    auto out = AtomicFileWriter::create(default_env(), join_path(w.staging_dir(), file)).value();
    ASSERT_TRUE(write_safetensors(out, mine).is_ok());
    ASSERT_TRUE(out.commit().is_ok());
    w.add_file({file, out.size(), out.crc32c()});
    w.add_tensor_shard("w", DType::kF32, {5, 7}, TensorShard::flat(file, "w.flat", begin, end));
    w.add_tensor_shard("b", DType::kBF16, {4, 6},
                       TensorShard::box(file, "b.box", {0, 3 * rank}, {4, 3}));
    if (rank == 0) w.add_tensor_shard("r", DType::kI32, {3}, TensorShard::whole(file, "r", {3}));
    // One flat shard holding all of a 2-d tensor: ZeRO with a single rank.
    if (rank == 1)
      w.add_tensor_shard("z", DType::kBF16, {4, 6}, TensorShard::flat(file, "z.flat", 0, 24));
  }
  const std::string path = w.commit().value();

  const CheckpointReader r = CheckpointReader::open(default_env(), path).value();
  EXPECT_TRUE(same_tensor(r.load_tensor("w").value(), flat_sharded));
  EXPECT_TRUE(same_tensor(r.load_tensor("b").value(), box_sharded));
  EXPECT_TRUE(same_tensor(r.load_tensor("r").value(), replicated));
  EXPECT_TRUE(same_tensor(r.load_tensor("z").value(), box_sharded));
  // Re-partitioning for 3 ranks: ranges that cross the writers' shard boundary.
  for (auto [begin, end] :
       {std::pair<int64_t, int64_t>{0, 12}, {12, 24}, {24, 35}, {10, 14}, {7, 7}}) {
    EXPECT_TRUE(same_tensor(r.load_flat_range("w", begin, end).value(),
                            views::narrow(flat_view, 0, begin, end - begin)));
  }
  const Tensor box_flat = views::view(core::contiguous(box_sharded), {24});
  EXPECT_TRUE(
      same_tensor(r.load_flat_range("b", 5, 20).value(), views::narrow(box_flat, 0, 5, 15)));
  EXPECT_THROW((void)r.load_flat_range("w", 30, 36), Error);
}

TEST(CheckpointDir, CommitRefusesAnIndexThatDoesNotMatchTheFiles) {
  ScratchDir dir;
  {
    auto w = CheckpointWriter::begin(default_env(), dir.path(), "a").value();
    ASSERT_TRUE(w.write_safetensors("m.safetensors", std::vector<NamedTensor>{{"x", zeros({2, 2})}})
                    .is_ok());
    w.add_tensor_shard("y", DType::kF32, {2, 2},
                       TensorShard::whole("m.safetensors", "nope", {2, 2}));
    EXPECT_TRUE(
        fails_with(w.commit().status(), "shard of tensor 'y' under 'nope'", "has no such tensor"));
  }
  {
    auto w = CheckpointWriter::begin(default_env(), dir.path(), "b").value();
    ASSERT_TRUE(w.write_safetensors("m.safetensors", std::vector<NamedTensor>{{"x", zeros({2, 2})}})
                    .is_ok());
    w.add_tensor_shard("y", DType::kBF16, {2, 2}, TensorShard::whole("m.safetensors", "x", {2, 2}));
    EXPECT_TRUE(
        fails_with(w.commit().status(), "BF16 (2, 2) shard of tensor 'y'", "has it as F32 (2, 2)"));
  }
  {
    auto w = CheckpointWriter::begin(default_env(), dir.path(), "c").value();
    w.add_file({"from_another_rank", 10, 0});
    EXPECT_TRUE(
        fails_with(w.commit().status(), "'from_another_rank' listed in the manifest is missing"));
  }
  EXPECT_TRUE(default_env()->list_dir(dir.path()).value().empty());
}

TEST(CheckpointDir, StepNames) {
  EXPECT_EQ(step_checkpoint_name(100), "step_000100");
  EXPECT_EQ(step_checkpoint_name(12345678), "step_12345678");
  EXPECT_EQ(parse_step_checkpoint_name("step_000100"), 100);
  EXPECT_EQ(parse_step_checkpoint_name("step_12345678"), 12345678);
  for (const char* bad : {"step_100", "step_0000100", "step_00010a", "stop_000100", "step_"})
    EXPECT_EQ(parse_step_checkpoint_name(bad), std::nullopt) << bad;
}

TEST(CheckpointDir, LatestAndPrune) {
  ScratchDir dir;
  Env* env = default_env();
  const std::string root = dir / "run";
  EXPECT_EQ(find_latest_checkpoint(env, root).value(), std::nullopt);  // no root yet
  for (int64_t step : {999999, 1000000, 2, 500000})
    ASSERT_TRUE(save(env, root, step_checkpoint_name(step), sample_contents(step)).is_ok());
  // Leftovers of crashes, an incomplete step directory, and something that is not ours.
  ASSERT_TRUE(create_dirs(env, root + "/.tmp-step_2000000").is_ok());
  ASSERT_TRUE(create_dirs(env, root + "/.deleting-step_000001").is_ok());
  ASSERT_TRUE(create_dirs(env, root + "/step_3000000").is_ok());
  ASSERT_TRUE(create_dirs(env, root + "/best").is_ok());

  auto listing = list_step_checkpoints(env, root).value();
  std::vector<int64_t> steps;
  for (const auto& l : listing) steps.push_back(l.step);
  EXPECT_EQ(steps, (std::vector<int64_t>{2, 500000, 999999, 1000000, 3000000}));
  EXPECT_FALSE(listing.back().complete);
  EXPECT_EQ(find_latest_checkpoint(env, root).value(), root + "/step_1000000");

  ASSERT_TRUE(prune_checkpoints(env, root, 2).is_ok());
  EXPECT_EQ(env->list_dir(root).value(),
            (std::vector<std::string>{"best", "step_1000000", "step_3000000", "step_999999"}));
  expect_contents(CheckpointReader::open(env, root + "/step_999999").value(),
                  sample_contents(999999));
  EXPECT_THROW((void)prune_checkpoints(env, root, 0), Error);
}

}  // namespace
}  // namespace trident::checkpoint
