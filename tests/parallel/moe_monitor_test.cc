// Monitoring of mixture-of-experts training (issue #51 item 7, train/moe_metrics.h): a tiny
// Mixtral-shaped LLaMA (2 sparse layers, 4 experts, top-2) trained a few steps, on 1 rank and,
// under mpirun -np 2, with data parallelism, with its experts split over the ranks
// (parallel.ep = 2) and as a two-stage pipeline, with and without activation checkpointing:
//   - metrics.jsonl's "moe_layers" has both layers every step, and each layer's tokens per
//     expert add up to the step's tokens x k (Note [Tokens per expert]: every micro-batch and
//     rank once, a checkpointed rerun not again), with nothing dropped; the layers' aux and z
//     losses average to "aux"'s;
//   - with a capacity, the dropped choices are what the layers recorded as "moe_dropped" (the
//     aux mean x layers x micro-batches x ranks) and at least what the capacity forces out of
//     the summed counts;
//   - under expert parallelism each layer's all_to_all bytes are whole rows of C floats, more
//     than none and at most every choice's row four times (six with the rerun), with a time;
//     full checkpointing's rerun adds the forward's two exchanges again (1.5x at step 1);
//   - expert_collapse judges the busiest layer's share of the counts and names the layer;
//   - the Prometheus gauges per (layer, expert) and per layer hold the last step's numbers (and
//     pass `promtool check metrics` where promtool is installed), and `trident report` draws
//     a heatmap per layer and the panel's charts (no dropped-choices chart when dropless);
//   - on the emulated device the same counts, and the losses' per-layer sums kept there agree;
//   - the ranks' texts merge as the Note says (sums, seconds averaged, malformed text refused).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "monitor/prometheus_text.h"
#include "monitor/run_report.h"
#include "support/mpi_training_test.h"
#include "train/moe_metrics.h"

namespace trident::train {
namespace {

constexpr int64_t kExperts = 4, kTopK = 2, kLayers = 2;

class MoeMonitorTest : public testing::MpiTrainingTest {
 protected:
  TrainConfig config(const std::string& out) const {
    TrainConfig cfg = testing::tiny_run_config(dir);
    cfg.model.arch = "llama";
    cfg.model.n_head = 4;
    cfg.model.family_values = {{"n_kv_heads", int64_t{2}},         {"intermediate_size", int64_t{48}},
                               {"num_local_experts", kExperts},    {"num_experts_per_tok", kTopK},
                               {"moe_intermediate_size", int64_t{32}}, {"router_aux_loss_coef", 0.05}};
    cfg.data.grad_accum_steps = 2;
    cfg.train.steps = 3;
    cfg.train.eval_interval = 0;
    cfg.train.out_dir = (dir / out).string();
    return cfg;
  }

  struct Trained {
    std::vector<StepMetrics> steps;
    std::string prometheus;  // this rank's registry after the run
  };
  Trained run(const TrainConfig& cfg, std::optional<Device> device = std::nullopt) const {
    auto t = Trainer::create(cfg, world, device);
    EXPECT_TRUE(t.is_ok()) << t.status().to_string();
    Trained r;
    if (!t.is_ok()) return r;
    t.value()->show_progress = false;
    t.value()->on_step = [&](const StepMetrics& m) { r.steps.push_back(m); };
    const Status s = t.value()->run();
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    r.prometheus = monitor::prometheus_text(t.value()->monitor()->registry());
    world->barrier();  // rank 0's metrics.jsonl is complete
    return r;
  }

  // metrics.jsonl's step lines (rank 0 writes it; every rank reads it).
  static std::vector<nlohmann::json> step_lines(const std::string& out_dir) {
    std::ifstream in(out_dir + "/metrics.jsonl");
    std::vector<nlohmann::json> lines;
    std::string line;
    while (std::getline(in, line)) {
      nlohmann::json j = nlohmann::json::parse(line);
      if (j.contains("loss")) lines.push_back(std::move(j));
    }
    return lines;
  }

  // The value of `name` with these labels in Prometheus text (NaN when absent).
  static double gauge(const std::string& text, const std::string& name, const std::vector<std::string>& labels) {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind(name + "{", 0) != 0) continue;
      bool all = true;
      for (const std::string& l : labels) all = all && line.find(l) != std::string::npos;
      if (all) return std::stod(line.substr(line.rfind(' ') + 1));
    }
    return std::nan("");
  }
};

TEST_F(MoeMonitorTest, TokensPerExpertAddUpToTheStepsChoices) {
  const int n = world->size();
  // (ep, pp): one process or data parallelism over the ranks; experts split over them; a
  // pipeline, each stage with one of the two layers.
  std::vector<std::pair<int64_t, int64_t>> layouts = {{1, 1}};
  if (n == 2) layouts.insert(layouts.end(), {{2, 1}, {1, 2}});
  for (const auto& [ep, pp] : layouts) {
    std::vector<int64_t> first_step_bytes;  // per layer, without checkpointing
    for (const char* checkpointing : {"none", "full"}) {
      const std::string what = "ep " + std::to_string(ep) + ", pp " + std::to_string(pp) + ", checkpointing " +
                               checkpointing + ", " + std::to_string(n) + " ranks";
      SCOPED_TRACE(what);
      TrainConfig cfg = config("counts_ep" + std::to_string(ep) + "_pp" + std::to_string(pp) + "_" + checkpointing);
      cfg.parallel.ep = ep;
      cfg.parallel.pp = pp;
      cfg.model.activation_checkpointing = checkpointing;
      const Trained t = run(cfg);
      const std::vector<nlohmann::json> lines = step_lines(cfg.train.out_dir);
      ASSERT_EQ(lines.size(), 3u);
      ASSERT_EQ(t.steps.size(), 3u);
      // Each layer records its losses as often as the others: their mean over the layers is
      // "aux"'s mean over layers, micro-batches and ranks.
      for (const StepMetrics& m : t.steps)
        for (const char* loss : {"moe_aux_loss", "moe_z_loss"}) {
          double mean = 0;
          for (const MoeLayerMetrics& l : m.moe_layers)
            mean += *(std::string(loss) == "moe_aux_loss" ? l.aux_loss : l.z_loss) / kLayers;
          EXPECT_NEAR(mean, m.aux.at(loss), 1e-12 * m.aux.at(loss)) << loss << ", step " << m.step;
        }
      const int64_t C = cfg.model.n_embd, choices = cfg.tokens_per_step() * kTopK;
      for (size_t s = 0; s < lines.size(); ++s) {
        ASSERT_TRUE(lines[s].contains("moe_layers")) << lines[s].dump();
        const nlohmann::json& layers = lines[s]["moe_layers"];
        ASSERT_EQ(layers.size(), static_cast<size_t>(kLayers)) << layers.dump();
        for (int64_t l = 0; l < kLayers; ++l) {
          const nlohmann::json& layer = layers[static_cast<size_t>(l)];
          EXPECT_EQ(layer["layer"].get<int64_t>(), l);
          const std::vector<int64_t> tokens = layer["tokens"].get<std::vector<int64_t>>();
          ASSERT_EQ(tokens.size(), static_cast<size_t>(kExperts));
          EXPECT_EQ(std::accumulate(tokens.begin(), tokens.end(), int64_t{0}), choices)
              << "step " << s + 1 << ", layer " << l << ": " << layer.dump();
          EXPECT_EQ(layer["dropped"].get<int64_t>(), 0) << "dropless";
          // What on_step saw is what the file says.
          EXPECT_EQ(t.steps[s].moe_layers[static_cast<size_t>(l)].tokens, tokens);
          ASSERT_TRUE(layer.contains("aux_loss") && layer.contains("z_loss")) << layer.dump();
          if (ep == 1) {
            EXPECT_FALSE(layer.contains("all_to_all_bytes")) << layer.dump();
            continue;
          }
          ASSERT_TRUE(layer.contains("all_to_all_bytes") && layer.contains("all_to_all_s")) << layer.dump();
          const int64_t bytes = layer["all_to_all_bytes"].get<int64_t>(), row = C * 4;
          const int64_t exchanges = std::string(checkpointing) == "full" ? 6 : 4;
          EXPECT_GT(bytes, 0);
          EXPECT_EQ(bytes % row, 0) << "whole rows of fp32";
          EXPECT_LE(bytes, exchanges * choices * row);
          EXPECT_GT(layer["all_to_all_s"].get<double>(), 0.0);
          // Step 1 routes the same rows either way (same weights, same batches): the rerun's
          // forward exchanges add half again (Note [Exchange cost per layer]).
          if (s > 0) continue;
          if (exchanges == 4) {
            first_step_bytes.push_back(bytes);
          } else if (first_step_bytes.size() == static_cast<size_t>(kLayers)) {
            EXPECT_EQ(2 * bytes, 3 * first_step_bytes[static_cast<size_t>(l)]) << "layer " << l;
          }
        }
      }
    }
  }
}

TEST_F(MoeMonitorTest, DroppedChoicesWithACapacity) {
  const int n = world->size();
  TrainConfig cfg = config("capacity");
  cfg.model.family_values["moe_capacity_factor"] = 0.5;
  cfg.parallel.ep = n;
  const Trained t = run(cfg);
  const std::vector<nlohmann::json> lines = step_lines(cfg.train.out_dir);
  ASSERT_EQ(lines.size(), 3u);
  // Each layer's forward on one rank's micro-batch of N tokens keeps ceil(0.5 N k / E) rows
  // per expert (moe/routing.h's expert_capacity).
  const int64_t N = cfg.data.batch_size / n * cfg.data.seq_len, forwards = cfg.data.grad_accum_steps * n;
  const int64_t capacity = (N * kTopK / kExperts + 1) / 2;
  for (size_t s = 0; s < lines.size(); ++s) {
    int64_t dropped = 0;
    for (const nlohmann::json& layer : lines[s]["moe_layers"]) {
      const std::vector<int64_t> tokens = layer["tokens"].get<std::vector<int64_t>>();
      int64_t forced = 0;  // what the capacity drops of the summed counts at the least
      for (int64_t v : tokens) forced += std::max<int64_t>(0, v - capacity * forwards);
      const int64_t d = layer["dropped"].get<int64_t>();
      EXPECT_GE(d, forced) << layer.dump();
      EXPECT_GE(d, cfg.tokens_per_step() * kTopK / 2) << "half the capacity drops half the choices or more";
      dropped += d;
    }
    // The layers' own record: the mean of "moe_dropped" over layers x micro-batches x ranks.
    const double mean = t.steps[s].aux.at("moe_dropped");
    EXPECT_EQ(static_cast<double>(dropped), mean * static_cast<double>(kLayers * forwards)) << lines[s].dump();
  }
}

TEST_F(MoeMonitorTest, GaugesAndTheReportPanel) {
  const int n = world->size();
  TrainConfig cfg = config("gauges");
  cfg.parallel.ep = n;
  // Fires at step 2 (some expert always has a share above 0; two steps in a row, the least
  // window) on the busiest layer's value.
  monitor::AlertRule collapse;
  collapse.name = "collapse";
  collapse.condition = "expert_collapse";
  collapse.fraction = 0.0;
  collapse.window = 2;
  collapse.actions = "log";
  cfg.alerts = {collapse};
  const Trained t = run(cfg);
  ASSERT_EQ(t.steps.size(), 3u);
  {
    double busiest = 0;
    int64_t at = -1;
    for (const MoeLayerMetrics& l : t.steps[1].moe_layers) {
      const double share = static_cast<double>(*std::max_element(l.tokens.begin(), l.tokens.end())) /
                           static_cast<double>(std::accumulate(l.tokens.begin(), l.tokens.end(), int64_t{0}));
      if (share > busiest) busiest = share, at = l.layer;
    }
    std::ifstream in(cfg.train.out_dir + "/alerts.jsonl");
    std::string line;
    ASSERT_TRUE(std::getline(in, line)) << "no expert_collapse event";
    const nlohmann::json e = nlohmann::json::parse(line);
    EXPECT_EQ(e.value("step", int64_t{0}), 2) << line;
    EXPECT_EQ(e.value("value", 0.0), busiest) << line;
    EXPECT_NE(line.find("busiest expert of layer " + std::to_string(at)), std::string::npos) << line;
  }
  for (const MoeLayerMetrics& l : t.steps.back().moe_layers) {
    const std::string layer = "layer=\"" + std::to_string(l.layer) + "\"";
    for (size_t e = 0; e < l.tokens.size(); ++e)
      EXPECT_EQ(gauge(t.prometheus, "trident_moe_expert_tokens", {layer, "expert=\"" + std::to_string(e) + "\""}),
                static_cast<double>(l.tokens[e]))
          << t.prometheus;
    EXPECT_EQ(gauge(t.prometheus, "trident_moe_dropped_tokens", {layer}), 0.0);
    EXPECT_NEAR(gauge(t.prometheus, "trident_moe_aux_loss", {layer}), *l.aux_loss, 1e-12 * *l.aux_loss);
    EXPECT_NEAR(gauge(t.prometheus, "trident_moe_z_loss", {layer}), *l.z_loss, 1e-12 * *l.z_loss);
    if (n > 1) {
      EXPECT_EQ(gauge(t.prometheus, "trident_moe_all_to_all_bytes", {layer}),
                static_cast<double>(*l.all_to_all_bytes));
      EXPECT_GT(gauge(t.prometheus, "trident_moe_all_to_all_seconds", {layer}), 0.0);
    }
  }
  if (world->rank() != 0) return;
  // The text Prometheus scrapes stays valid with the new families (where promtool is installed).
  if (std::system("command -v promtool > /dev/null 2>&1") == 0) {
    const std::string file = cfg.train.out_dir + "/metrics.prom";
    std::ofstream(file) << t.prometheus;
    EXPECT_EQ(std::system(("promtool check metrics < " + file + " > " + file + ".out 2>&1").c_str()), 0)
        << std::ifstream(file + ".out").rdbuf();
  }
  const std::string html_file = cfg.train.out_dir + "/report.html";
  const Status s = monitor::write_run_report(cfg.train.out_dir, html_file);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  std::stringstream html;
  html << std::ifstream(html_file).rdbuf();
  for (int64_t l = 0; l < kLayers; ++l)
    EXPECT_NE(html.str().find("class=\"expert-load\" data-layer=\"" + std::to_string(l) + "\" data-experts=\"4\" "
                              "data-columns=\"3\""),
              std::string::npos)
        << "no heatmap of layer " << l;
  EXPECT_NE(html.str().find("<figcaption>Busiest expert's share"), std::string::npos);
  EXPECT_EQ(html.str().find("<figcaption>Dropped choices per step"), std::string::npos) << "dropless";
  EXPECT_NE(html.str().find("<p class=\"no-drops\">"), std::string::npos);
  EXPECT_NE(html.str().find("<figcaption>Load-balancing loss per layer"), std::string::npos);
  EXPECT_EQ(html.str().find("<figcaption>Expert-parallel all_to_all time") != std::string::npos, n > 1);
}

TEST_F(MoeMonitorTest, OnTheEmulatedDeviceTheHostsNumbers) {
  // The losses' per-layer sums are kept on the device (AuxOutputs' device sums) and read once.
  TrainConfig cfg = config("device");
  cfg.parallel.ep = world->size();
  const Trained host = run(cfg);
  cfg.train.out_dir += "_on_device";
  const Trained device = run(cfg, testing::emulated_device());
  ASSERT_EQ(device.steps.size(), host.steps.size());
  for (size_t s = 0; s < host.steps.size(); ++s) {
    ASSERT_EQ(device.steps[s].moe_layers.size(), static_cast<size_t>(kLayers));
    for (size_t l = 0; l < host.steps[s].moe_layers.size(); ++l) {
      const MoeLayerMetrics &h = host.steps[s].moe_layers[l], &d = device.steps[s].moe_layers[l];
      EXPECT_EQ(d.tokens, h.tokens) << "step " << s + 1 << ", layer " << l;
      EXPECT_NEAR(*d.aux_loss, *h.aux_loss, 1e-6 * *h.aux_loss) << "fp32 sums on the device";
      EXPECT_NEAR(*d.z_loss, *h.z_loss, 1e-6 * *h.z_loss);
    }
  }
}

TEST_F(MoeMonitorTest, RanksSumsMerge) {
  if (world->rank() != 0) return;
  nn::AuxLayerSums a, b;
  const double t0[] = {3, 1}, t1[] = {2, 6}, d[] = {1}, bytes[] = {512}, sec0[] = {0.25}, sec1[] = {0.75};
  nn::add_layer_sums(a, {1, "moe_tokens"}, t0);
  nn::add_layer_sums(a, {1, "moe_tokens"}, t0);  // a second micro-batch
  nn::add_layer_sums(a, {1, "moe_dropped"}, d);
  nn::add_layer_sums(a, {1, "moe_all_to_all_bytes"}, bytes);
  nn::add_layer_sums(a, {1, "moe_all_to_all_seconds"}, sec0);
  nn::add_layer_sums(b, {1, "moe_tokens"}, t1);
  nn::add_layer_sums(b, {1, "moe_all_to_all_bytes"}, bytes);
  nn::add_layer_sums(b, {1, "moe_all_to_all_seconds"}, sec1);
  nn::add_layer_sums(b, {0, "moe_tokens"}, t1);  // another stage's layer
  const std::vector<MoeLayerMetrics> m = merge_moe_layers({layer_sums_to_json(a), layer_sums_to_json(b)});
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].layer, 0);
  EXPECT_EQ(m[0].tokens, (std::vector<int64_t>{2, 6}));
  EXPECT_FALSE(m[0].all_to_all_bytes.has_value());
  EXPECT_EQ(m[1].tokens, (std::vector<int64_t>{8, 8}));
  EXPECT_EQ(m[1].dropped, 1);
  EXPECT_EQ(*m[1].all_to_all_bytes, 1024);
  EXPECT_EQ(*m[1].all_to_all_seconds, 0.5);  // the mean over the ranks
  EXPECT_EQ(moe_layers_to_json({m[1]}),
            R"([{"layer": 1, "tokens": [8, 8], "dropped": 1, "all_to_all_bytes": 1024, "all_to_all_s": 0.5}])");
  EXPECT_EQ(moe_layers_to_json({m[0]}), R"([{"layer": 0, "tokens": [2, 6], "dropped": 0}])");
  const double three[] = {1, 2, 3};
  EXPECT_THROW(nn::add_layer_sums(a, {1, "moe_tokens"}, three), Error);
  EXPECT_THROW(merge_moe_layers({"{}"}), Error);
  EXPECT_THROW(merge_moe_layers({R"([[1, "moe_tokens"]])"}), Error);
}

}  // namespace
}  // namespace trident::train
