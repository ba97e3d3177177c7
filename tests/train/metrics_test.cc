// train/metrics.h's auxiliary values: the text ranks exchange (exact doubles, a null for a
// non-finite sum), the merge over ranks that record different names, and the "aux" object of
// a metrics.jsonl line (names escaped; no key at all without values). reconcile_metrics on
// resume (Note [Metrics on resume]): steps after the checkpoint's go, a torn line goes, rollback
// history stays, an unchanged file is not rewritten. RunLock: a process takes its own lock
// again, another process is refused with the holder named, and a dead holder frees it.
#include "train/metrics.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "train/run_lock.h"

namespace trident::train {
namespace {

TEST(AuxValuesOverRanks, AddSumsAndCountsByName) {
  // Two pipeline stages: stage 0 records "a" (two micro-batches), stage 1 "a" once and "b".
  const std::string stage0 = aux_values_to_json({{"a", {0.1 + 0.2, 2}}});
  const std::string stage1 = aux_values_to_json({{"a", {0.5, 1}}, {"b", {6.0, 3}}});
  const std::map<std::string, double> means = merge_aux_values({stage0, stage1, aux_values_to_json({})});
  ASSERT_EQ(means.size(), 2u);
  EXPECT_EQ(means.at("a"), (0.1 + 0.2 + 0.5) / 3);  // the sum travels exactly
  EXPECT_EQ(means.at("b"), 2.0);
}

TEST(AuxValuesOverRanks, ANonFiniteSumStaysNotFinite) {
  const std::map<std::string, double> means =
      merge_aux_values({aux_values_to_json({{"a", {std::nan(""), 1}}}), aux_values_to_json({{"a", {1.0, 1}}})});
  EXPECT_TRUE(std::isnan(means.at("a")));
}

TEST(AuxValuesOverRanks, RefusesTextItCannotRead) {
  EXPECT_THROW(merge_aux_values({"not json"}), Error);
  EXPECT_THROW(merge_aux_values({R"({"a": 1.0})"}), Error);
  EXPECT_THROW(merge_aux_values({R"({"a": [1.0, 0.5]})"}), Error);
}

TEST(MetricsWriter, WritesAuxValuesOnlyWhenThereAreAny) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("trident_metrics_test_" + std::to_string(::getpid()) + ".jsonl");
  std::filesystem::remove(path);
  {
    auto w = MetricsWriter::open(path.string());
    ASSERT_TRUE(w.is_ok());
    StepMetrics m;
    m.step = 1;
    w.value().write_step(m);
    m.step = 2;
    m.aux = {{"router/load \"balancing\"", 0.125}, {"z_loss", std::nan("")}};
    w.value().write_step(m);
  }
  std::ifstream in(path);
  std::string first, second;
  ASSERT_TRUE(std::getline(in, first) && std::getline(in, second));
  EXPECT_FALSE(nlohmann::json::parse(first).contains("aux"));
  const nlohmann::json j = nlohmann::json::parse(second);
  EXPECT_EQ(j["aux"]["router/load \"balancing\""].get<double>(), 0.125);
  EXPECT_TRUE(j["aux"]["z_loss"].is_null());
  EXPECT_EQ(j["step_s"].get<double>(), 0.0);  // the line goes on after it
  std::filesystem::remove(path);
}

std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

struct TempDir {
  std::filesystem::path path = std::filesystem::temp_directory_path() /
                               ("trident_run_folder_" + std::to_string(::getpid()) + "_" +
                                ::testing::UnitTest::GetInstance()->current_test_info()->name());
  TempDir() {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

TEST(ReconcileMetrics, DropsStepsAfterTheCheckpointAndATornLine) {
  TempDir d;
  const std::filesystem::path p = d.path / "metrics.jsonl";
  std::ofstream(p) << "{\"step\": 1, \"loss\": 3}\n{\"step\": 2, \"loss\": 2}\n{\"step\": 2, \"val_loss\": 2.5}\n"
                      "{\"step\": 3, \"loss\": 1}\n{\"step\": 4, \"lo";
  auto r = reconcile_metrics(p.string(), 2);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(read_all(p), "{\"step\": 1, \"loss\": 3}\n{\"step\": 2, \"loss\": 2}\n{\"step\": 2, \"val_loss\": 2.5}\n");
  EXPECT_EQ(r.value().kept, 3);
  EXPECT_EQ(r.value().removed, 1);
  EXPECT_EQ(r.value().torn, 1);
  EXPECT_TRUE(r.value().rewritten);
  EXPECT_FALSE(std::filesystem::exists(d.path / "metrics.jsonl.tmp"));
  // Once more: nothing to change, nothing rewritten.
  r = reconcile_metrics(p.string(), 2);
  ASSERT_TRUE(r.is_ok());
  EXPECT_FALSE(r.value().rewritten);
  // A fresh start (step 0) keeps no stale line; a missing file is fine.
  ASSERT_TRUE(reconcile_metrics(p.string(), 0).is_ok());
  EXPECT_EQ(read_all(p), "");
  EXPECT_TRUE(reconcile_metrics((d.path / "none.jsonl").string(), 5).is_ok());
}

TEST(ReconcileMetrics, KeepsRollbackHistory) {
  TempDir d;
  const std::filesystem::path p = d.path / "metrics.jsonl";
  // Steps 1..4, a rollback from 4 to 2, steps 3..5 again; resumed from the checkpoint at 4.
  const std::string history =
      "{\"step\": 1}\n{\"step\": 2}\n{\"step\": 3}\n{\"step\": 4}\n{\"rollback\": {\"from_step\": 4, \"to_step\": 2}}\n";
  std::ofstream(p) << history << "{\"step\": 3}\n{\"step\": 4}\n{\"step\": 5}\n";
  ASSERT_TRUE(reconcile_metrics(p.string(), 4).is_ok());
  EXPECT_EQ(read_all(p), history + "{\"step\": 3}\n{\"step\": 4}\n");
  // Resumed from step 1, before the rollback's target: that trajectory and its rollback go.
  ASSERT_TRUE(reconcile_metrics(p.string(), 1).is_ok());
  EXPECT_EQ(read_all(p), "{\"step\": 1}\n");
}

TEST(RunLock, OneProcessAtATime) {
  if (std::system("command -v flock >/dev/null 2>&1") != 0) GTEST_SKIP() << "util-linux's flock(1) is not installed";
  TempDir d;
  std::optional<StatusOr<RunLock>> first;
  first.emplace(RunLock::acquire(d.path.string()));
  ASSERT_TRUE(first->is_ok()) << first->status().message();
  {
    auto again = RunLock::acquire(d.path.string());  // the same process: shared
    EXPECT_TRUE(again.is_ok()) << again.status().message();
  }
  // Another process (flock(1), a fresh exec) cannot take it while this one holds it; the record names us.
  const std::string other = "flock -n '" + (d.path / ".lock").string() + "' true";
  EXPECT_NE(std::system(other.c_str()), 0);
  EXPECT_NE(read_all(d.path / ".lock").find("pid " + std::to_string(::getpid()) + " on host "), std::string::npos);
  first.reset();  // the last RunLock goes: the lock is free
  EXPECT_EQ(std::system(other.c_str()), 0);
  auto after = RunLock::acquire(d.path.string());
  EXPECT_TRUE(after.is_ok());
}

}  // namespace
}  // namespace trident::train
