#include "checkpoint/manifest.h"

#include <gtest/gtest.h>

#include <functional>

#include <nlohmann/json.hpp>

#include "checkpoint_test_util.h"

namespace trident::checkpoint {
namespace {

using testing::fails_with;

Manifest sample() {
  Manifest m;
  m.name = "step_000100";
  m.metadata = {{"step", "100"}};
  m.files = {{"model.safetensors", 1234, 0xE3069283u},
             {"optim.rank00000.safetensors", 20, 1},
             {"optim.rank00001.safetensors", 30, 2}};
  m.tensors["wte.weight"] = {
      DType::kF32, Shape{5, 7}, {TensorShard::whole("model.safetensors", "wte.weight", {5, 7})}};
  m.tensors["exp_avg.wte.weight"] = {
      DType::kF32,
      Shape{5, 7},
      {TensorShard::flat("optim.rank00000.safetensors", "exp_avg.wte.weight", 0, 12),
       TensorShard::flat("optim.rank00001.safetensors", "exp_avg.wte.weight", 12, 35)}};
  m.tensors["tp.weight"] = {
      DType::kBF16,
      Shape{4, 6},
      {TensorShard::box("optim.rank00000.safetensors", "tp.weight", {0, 0}, {4, 3}),
       TensorShard::box("optim.rank00001.safetensors", "tp.weight", {0, 3}, {4, 3})}};
  return m;
}

// The on-disk schema, frozen: changing it means bumping kManifestVersion.
TEST(Manifest, JsonSchema) {
  Manifest m;
  m.name = "step_000001";
  m.metadata = {{"step", "1"}};
  m.files = {{"model.safetensors", 64, 0xE3069283u}, {"opt.safetensors", 32, 0xABCDEF01u}};
  m.tensors["w"] = {
      DType::kBF16, Shape{2, 3}, {TensorShard::whole("model.safetensors", "w", {2, 3})}};
  m.tensors["m"] = {DType::kF32, Shape{4}, {TensorShard::flat("opt.safetensors", "m.0", 0, 4)}};
  const char* expected = R"({
 "format": "trident-checkpoint",
 "version": 1,
 "name": "step_000001",
 "metadata": {
  "step": "1"
 },
 "files": [
  {
   "name": "model.safetensors",
   "size": 64,
   "crc32c": "e3069283"
  },
  {
   "name": "opt.safetensors",
   "size": 32,
   "crc32c": "abcdef01"
  }
 ],
 "tensors": {
  "m": {
   "dtype": "F32",
   "shape": [
    4
   ],
   "shards": [
    {
     "file": "opt.safetensors",
     "key": "m.0",
     "flat_range": [
      0,
      4
     ]
    }
   ]
  },
  "w": {
   "dtype": "BF16",
   "shape": [
    2,
    3
   ],
   "shards": [
    {
     "file": "model.safetensors",
     "key": "w",
     "offsets": [
      0,
      0
     ],
     "shape": [
      2,
      3
     ]
    }
   ]
  }
 }
}
)";
  EXPECT_EQ(manifest_to_json(m), expected);
}

TEST(Manifest, RoundTrip) {
  const Manifest m = sample();
  ASSERT_TRUE(validate_manifest(m, "m").is_ok());
  const std::string text = manifest_to_json(m);
  const Manifest back = parse_manifest(text, "m").value();
  EXPECT_EQ(manifest_to_json(back), text);
  EXPECT_EQ(back.files[0].crc32c, 0xE3069283u);
  EXPECT_EQ(back.tensors.at("exp_avg.wte.weight").shards[1].flat_end, 35);
  EXPECT_EQ(back.tensors.at("tp.weight").shards[1].offsets, (std::vector<int64_t>{0, 3}));
}

TEST(Manifest, ShardsMustCoverEachTensorExactlyOnce) {
  struct Case {
    const char* what;
    std::vector<TensorShard> shards;
    const char* message;
  };
  const std::string f = "optim.rank00000.safetensors";
  const std::vector<Case> cases = {
      {"flat gap",
       {TensorShard::flat(f, "k", 0, 10), TensorShard::flat(f, "k2", 12, 24)},
       "elements [10, 12) are in no shard"},
      {"flat short", {TensorShard::flat(f, "k", 0, 20)}, "elements [20, 24) are in no shard"},
      {"flat overlap",
       {TensorShard::flat(f, "k", 0, 13), TensorShard::flat(f, "k2", 12, 24)},
       "overlaps another shard"},
      {"flat outside", {TensorShard::flat(f, "k", 0, 25)}, "not a range inside [0, 24]"},
      {"box overlap",
       {TensorShard::box(f, "a", {0, 0}, {4, 4}), TensorShard::box(f, "b", {0, 3}, {4, 3})},
       "overlaps"},
      {"box missing part",
       {TensorShard::box(f, "a", {0, 0}, {4, 3})},
       "hold 12 elements, the tensor has 24"},
      {"box outside", {TensorShard::box(f, "a", {0, 4}, {4, 3})}, "outside the tensor in dim 1"},
      {"box rank", {TensorShard::box(f, "a", {0}, {24})}, "one offset and one extent per dim"},
      {"mixed",
       {TensorShard::box(f, "a", {0, 0}, {2, 6}), TensorShard::flat(f, "b", 12, 24)},
       "mixes box and flat"},
      {"unknown file",
       {TensorShard::whole("nope.safetensors", "a", {4, 6})},
       "names a file not in the manifest"},
      {"no shards", {}, "has no shards"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Manifest m = sample();
    m.tensors["tp.weight"].shards = c.shards;
    Status s = validate_manifest(m, "checkpoint 'x'");
    EXPECT_TRUE(fails_with(s, "checkpoint 'x'", "tensor 'tp.weight' (4, 6)", c.message));
  }
}

TEST(Manifest, FileNames) {
  EXPECT_TRUE(is_valid_checkpoint_file_name("model.safetensors"));
  for (const char* bad : {"", ".hidden", "a/b", "manifest.json", "DONE"}) {
    EXPECT_FALSE(is_valid_checkpoint_file_name(bad)) << bad;
  }
  Manifest m = sample();
  m.files.push_back(m.files[0]);
  EXPECT_TRUE(fails_with(validate_manifest(m, "w"), "file 'model.safetensors' is listed twice"));
  m = sample();
  m.files[0].name = "../escape";
  EXPECT_TRUE(
      fails_with(validate_manifest(m, "w"), "'../escape' is not a valid checkpoint file name"));
}

TEST(Manifest, ParseRefusesWhatItDoesNotUnderstand) {
  nlohmann::json good = nlohmann::json::parse(manifest_to_json(sample()));
  struct Case {
    const char* what;
    std::function<void(nlohmann::json&)> edit;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"newer version", [](auto& j) { j["version"] = 2; }, "format version 2"},
      {"other format", [](auto& j) { j["format"] = "zip"; }, "\"format\" is 'zip'"},
      {"unknown key", [](auto& j) { j["extra"] = 1; }, "unknown key 'extra'"},
      {"unknown file key", [](auto& j) { j["files"][0]["md5"] = "x"; }, "unknown key 'md5'"},
      {"bad crc", [](auto& j) { j["files"][0]["crc32c"] = "E3069283"; },
       "crc32c 'E3069283' is not"},
      {"negative size", [](auto& j) { j["files"][0]["size"] = -1; },
       "\"size\" is not a non-negative integer"},
      {"missing files", [](auto& j) { j.erase("files"); }, "lacks \"files\""},
      {"bad dtype", [](auto& j) { j["tensors"]["tp.weight"]["dtype"] = "I8"; }, "dtype 'I8'"},
      {"metadata not string", [](auto& j) { j["metadata"]["step"] = 100; },
       "metadata 'step' is not a string"},
      {"coverage", [](auto& j) { j["tensors"]["tp.weight"]["shards"].erase(1); }, "in no shard"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    nlohmann::json j = good;
    c.edit(j);
    EXPECT_TRUE(
        fails_with(parse_manifest(j.dump(), "manifest 'm'").status(), "manifest 'm'", c.message));
  }
  EXPECT_TRUE(fails_with(parse_manifest("{\"format\": 1, \"format\": 2}", "m").status(), "twice"));
  EXPECT_TRUE(fails_with(parse_manifest("{", "m").status(), "not valid JSON"));
}

}  // namespace
}  // namespace trident::checkpoint
