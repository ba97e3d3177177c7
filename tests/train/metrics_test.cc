// train/metrics.h's auxiliary values: the text ranks exchange (exact doubles, a null for a
// non-finite sum), the merge over ranks that record different names, and the "aux" object of
// a metrics.jsonl line (names escaped; no key at all without values).
#include "train/metrics.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

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

}  // namespace
}  // namespace trident::train
