#include "config/config_tree.h"

#include <gtest/gtest.h>

namespace trident::config {
namespace {

struct OptimOptions {
  double lr = 6e-4;
  int64_t warmup_steps = 100;
  bool fused = true;
  std::string schedule = "cosine";
  static const OptionTable<OptimOptions>& table() {
    static const auto t = OptionTable<OptimOptions>("optim", "AdamW")
                              .add("lr", &OptimOptions::lr, "peak learning rate", Range::positive())
                              .add("warmup_steps", &OptimOptions::warmup_steps, "linear warmup", Range::non_negative())
                              .add("fused", &OptimOptions::fused, "fused kernel")
                              .add("schedule", &OptimOptions::schedule, "decay shape", {"cosine", "constant"});
    return t;
  }
};

struct DataOptions {
  int64_t batch_size = 8;
  static const OptionTable<DataOptions>& table() {
    static const auto t = OptionTable<DataOptions>("data", "Data").add("batch_size", &DataOptions::batch_size, "sequences per step", Range::at_least(1));
    return t;
  }
};

class ConfigTreeTest : public ::testing::Test {
 protected:
  ConfigTreeTest() {
    tree.bind(optim);
    tree.bind(data);
  }
  OptimOptions optim;
  DataOptions data;
  ConfigTree tree;
};

TEST_F(ConfigTreeTest, LoadsTomlAndOverrides) {
  ASSERT_TRUE(tree.load_toml_string("[optim]\nlr = 1e-3\nwarmup_steps = 5\nschedule = \"constant\"\n[data]\nbatch_size = 4\n", "t.toml").is_ok());
  EXPECT_EQ(optim.lr, 1e-3);
  EXPECT_EQ(optim.warmup_steps, 5);
  EXPECT_EQ(optim.schedule, "constant");
  EXPECT_EQ(data.batch_size, 4);
  ASSERT_TRUE(tree.apply_override("optim.lr=3e-4", "cli").is_ok());
  ASSERT_TRUE(tree.apply_override("optim.fused=false", "cli").is_ok());
  EXPECT_EQ(optim.lr, 3e-4);
  EXPECT_FALSE(optim.fused);
}

TEST_F(ConfigTreeTest, IntegersWidenToFloats) {
  ASSERT_TRUE(tree.load_toml_string("[optim]\nlr = 1\n", "t.toml").is_ok());
  EXPECT_EQ(optim.lr, 1.0);
}

TEST_F(ConfigTreeTest, UnknownKeysSuggestTheClosest) {
  Status s = tree.load_toml_string("[optim]\nwarmup_step = 5\n", "t.toml");
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("unknown key 'warmup_step'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("did you mean 'warmup_steps'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("t.toml:2"), std::string::npos) << s.message();
  s = tree.load_toml_string("[optimizer]\nlr = 1\n", "t.toml");
  EXPECT_NE(s.message().find("did you mean [optim]"), std::string::npos) << s.message();
  s = tree.load_toml_string("batch_size = 4\n[optim]\nlr = 1\n", "t.toml");  // a key above every header
  EXPECT_NE(s.message().find("t.toml:1: 'batch_size' is outside any section: put it under [data]"), std::string::npos)
      << s.message();
  s = tree.apply_override("data.batchsize=3", "--data.batchsize");
  EXPECT_NE(s.message().find("did you mean 'batch_size'"), std::string::npos) << s.message();
}

TEST_F(ConfigTreeTest, BadValuesNameKeyValueAndWhatIsAllowed) {
  Status s = tree.load_toml_string("[optim]\nlr = -1.0\n", "t.toml");
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("lr = -1"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("> 0"), std::string::npos) << s.message();
  s = tree.load_toml_string("[optim]\nschedule = \"cosin\"\n", "t.toml");
  EXPECT_NE(s.message().find("did you mean 'cosine'"), std::string::npos) << s.message();
  s = tree.load_toml_string("[data]\nbatch_size = \"8\"\n", "t.toml");
  EXPECT_NE(s.message().find("expected an integer"), std::string::npos) << s.message();
  s = tree.apply_override("data.batch_size=0", "cli");
  EXPECT_NE(s.message().find(">= 1"), std::string::npos) << s.message();
  s = tree.apply_override("data.batch_size=eight", "cli");
  EXPECT_FALSE(s.is_ok());
  s = tree.apply_override("batch_size=3", "cli");
  EXPECT_NE(s.message().find("section.key=value"), std::string::npos) << s.message();
  s = tree.load_toml_string("[optim\nlr=1", "broken.toml");
  EXPECT_NE(s.message().find("broken.toml:1"), std::string::npos) << s.message();
}

TEST_F(ConfigTreeTest, PrintedConfigLoadsBackIdentically) {
  optim.lr = 1.25e-4;
  optim.schedule = "constant";
  data.batch_size = 3;
  const std::string printed = tree.to_toml();
  OptimOptions o2;
  DataOptions d2;
  ConfigTree t2;
  t2.bind(o2);
  t2.bind(d2);
  ASSERT_TRUE(t2.load_toml_string(printed, "printed").is_ok()) << printed;
  EXPECT_EQ(o2.lr, optim.lr);
  EXPECT_EQ(o2.schedule, "constant");
  EXPECT_EQ(d2.batch_size, 3);
  EXPECT_EQ(t2.to_toml(), printed);
  EXPECT_NE(tree.help().find("--optim.lr="), std::string::npos);
  EXPECT_EQ(tree.keys(), (std::vector<std::string>{"optim.lr", "optim.warmup_steps", "optim.fused", "optim.schedule", "data.batch_size"}));
}

}  // namespace
}  // namespace trident::config

namespace trident::config {
namespace {

// [[rules]] tables: a list section (ConfigTree::bind_list).
struct Rule {
  std::string name = "default";
  int64_t patience = 3;
  static const OptionTable<Rule>& table() {
    static const auto t = OptionTable<Rule>("rules", "rules")
                              .add("name", &Rule::name, "name")
                              .add("patience", &Rule::patience, "patience", Range::at_least(1));
    return t;
  }
};

TEST(ConfigTreeList, TablesReplaceTheDefaultsAndPrintBack) {
  std::vector<Rule> rules = {Rule{}};
  ConfigTree tree;
  tree.bind_list(rules);
  ASSERT_TRUE(tree.load_toml_string("[[rules]]\nname = \"a\"\n[[rules]]\npatience = 5\n", "t.toml").is_ok());
  ASSERT_EQ(rules.size(), 2u);
  EXPECT_EQ(rules[0].name, "a");
  EXPECT_EQ(rules[0].patience, 3);
  EXPECT_EQ(rules[1].name, "default");
  EXPECT_EQ(rules[1].patience, 5);
  std::vector<Rule> again;
  ConfigTree tree2;
  tree2.bind_list(again);
  ASSERT_TRUE(tree2.load_toml_string(tree.to_toml(), "printed").is_ok()) << tree.to_toml();
  ASSERT_EQ(again.size(), 2u);
  EXPECT_EQ(again[1].patience, 5);
  EXPECT_NE(tree.help().find("[[rules]]"), std::string::npos);
}

TEST(ConfigTreeList, EmptyArrayRemovesAndBadTablesAreNamed) {
  std::vector<Rule> rules = {Rule{}};
  ConfigTree tree;
  tree.bind_list(rules);
  ASSERT_TRUE(tree.load_toml_string("rules = []\n", "t.toml").is_ok());
  EXPECT_TRUE(rules.empty());
  EXPECT_EQ(tree.to_toml().substr(0, 9), "# rules\nr");
  Status s = tree.load_toml_string("[[rules]]\npatiense = 2\n", "t.toml");
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.to_string().find("t.toml:2 [[rules]]: unknown key 'patiense' (did you mean 'patience'?)"),
            std::string::npos)
      << s.to_string();
  s = tree.load_toml_string("[[rules]]\npatience = 0\n", "t.toml");
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.to_string().find("patience"), std::string::npos) << s.to_string();
  s = tree.load_toml_string("[rules]\nname = \"x\"\n", "t.toml");
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.to_string().find("[[rules]]"), std::string::npos) << s.to_string();
}

}  // namespace
}  // namespace trident::config
