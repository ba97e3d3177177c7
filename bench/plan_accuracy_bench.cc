// The planner against the trainer: for every layout the planner lists for a config on the
// ranks this job was started with (mpirun -np N; alone: one process), the predicted peak
// bytes per allocator category and step time (planner/plan.h) beside the measured ones
// (planner/measure.h), as JSON lines on rank 0, one per layout.
//
// Usage: plan_accuracy_bench [--config tiny|small|124M|tiny-moe] [--cluster FILE (calibrated: trident calibrate)]
//          [--steps N] [--warmup N] [--only SUBSTRING] [--limit N] [--stride K] [--skip-file FILE]
//          [--predict-only N] [--offload] [--section.key=value ...]
// --stride K measures every K-th listed layout (a sample, where running them all takes too long);
// --skip-file names layouts already measured, one per line (bench/plan_accuracy.py resuming).
// --predict-only N: measure nothing (one process, no mpirun); for every layout on N ranks print
// the predicted peak bytes of each pipeline stage per category (bench/plan_accuracy.py --repredict-by-rank compares them
// with a table's measured rows, rank by rank).
// --offload also lists ZeRO-Offload's layouts; with --train.device=cuda the device's allocator
// is measured, and the host's where offload keeps its state (Note [ZeRO-Offload's memory]).
// Each process works in /tmp/plan_accuracy_bench/PID, so several jobs can share the machine.
// Step times are each layout's fastest measured step (Note [Measured step time]).
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/mpi_communicator.h"
#include "config/config_tree.h"
#include "planner/measure.h"
#include "planner/named_configs.h"
#include "planner/plan.h"

using namespace trident;

int main(int argc, char** argv) {
  std::string config = "tiny", cluster_file, only, skip_file;
  int64_t steps = 2, warmup = 1, limit = 0, stride = 1, predict_only = 0;
  bool offload = false;
  std::vector<std::string> overrides;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "plan_accuracy_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--config") config = next();
    else if (a == "--cluster") cluster_file = next();
    else if (a == "--steps") steps = std::stoll(next());
    else if (a == "--warmup") warmup = std::stoll(next());
    else if (a == "--only") only = next();
    else if (a == "--limit") limit = std::stoll(next());
    else if (a == "--stride") stride = std::max<int64_t>(1, std::stoll(next()));
    else if (a == "--skip-file") skip_file = next();
    else if (a == "--offload") offload = true;
    else if (a == "--predict-only") {
      predict_only = std::stoll(next());
      if (predict_only < 1) {
        std::fprintf(stderr, "plan_accuracy_bench: --predict-only %lld: the rank count must be >= 1\n",
                     static_cast<long long>(predict_only));
        return 2;
      }
    }
    else if (a.starts_with("--") && a.find('=') != std::string::npos) overrides.push_back(a.substr(2));
    else {
      std::fprintf(stderr, "plan_accuracy_bench: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  std::shared_ptr<comm::Communicator> world;
  if (comm::MpiRuntime::launched_by_mpirun()) {
    if (predict_only > 0) {
      std::fprintf(stderr, "plan_accuracy_bench: --predict-only measures nothing: run it as one process, not under mpirun\n");
      return 2;
    }
    world = comm::MpiRuntime::world();
  }
  const int ranks = predict_only > 0 ? static_cast<int>(predict_only) : world ? world->size() : 1;
  const int rank = world ? world->rank() : 0;
  try {
    train::TrainConfig cfg;
    config::ConfigTree tree;
    cfg.bind(tree);
    std::vector<std::string> all = planner::named_config_overrides(config);
    for (auto& o : all) o = o.substr(2);
    all.insert(all.end(), overrides.begin(), overrides.end());
    if (Status s = tree.apply_overrides(all, "plan_accuracy_bench"); !s.is_ok()) throw std::runtime_error(s.to_string());
    cfg.train.threads = cfg.train.threads > 0 ? cfg.train.threads : 1;
    planner::Cluster cluster = planner::local_cluster(ranks);
    if (!cluster_file.empty()) {
      auto c = planner::load_cluster(cluster_file);
      if (!c.is_ok()) throw std::runtime_error(c.status().to_string());
      cluster = c.value();
    }
    std::set<std::string> skip;
    if (!skip_file.empty()) {
      std::ifstream in(skip_file);
      if (!in) throw std::runtime_error("--skip-file: cannot read '" + skip_file + "'");
      for (std::string line; std::getline(in, line);)
        if (!line.empty()) skip.insert(line);
    }
    const std::string scratch = "/tmp/plan_accuracy_bench/" + std::to_string(::getpid());
    planner::RunSpec run = planner::run_spec(cfg);
    if (cluster.gpu()) run.place_on_device();
    planner::SearchSpace space;
    space.ranks = ranks;
    space.offload = offload;
    int64_t done = 0, matched = 0;
    for (const planner::Layout& layout : planner::enumerate_layouts(run, space)) {
      if (!only.empty() && layout.str().find(only) == std::string::npos) continue;
      if (skip.count(layout.str())) continue;
      if (matched++ % stride != 0) continue;
      if (limit > 0 && done >= limit) break;
      ++done;
      const planner::Candidate predicted = planner::evaluate(run, layout, cluster, world != nullptr || ranks > 1);
      if (predict_only > 0) {
        nlohmann::ordered_json j;
        j["config"] = config;
        j["ranks"] = ranks;
        j["layout"] = layout.str();
        nlohmann::ordered_json stages = nlohmann::json::array();
        for (const auto& stage : predicted.memory.stage_peak_bytes) {
          nlohmann::ordered_json cats;
          for (int k = 0; k < kNumMemoryCategories; ++k)
            if (static_cast<MemoryCategory>(k) != MemoryCategory::kOther)
              cats[memory_category_name(static_cast<MemoryCategory>(k))] = stage[static_cast<size_t>(k)];
          stages.push_back(cats);
        }
        j["stage_peak_bytes"] = stages;
        std::printf("%s\n", j.dump().c_str());
        continue;
      }
      train::TrainConfig c = cfg;
      layout.apply(c);
      auto measured = planner::measure_layout(c, world, scratch, warmup, steps);
      if (!measured.is_ok()) throw std::runtime_error(layout.str() + ": " + measured.status().to_string());
      if (rank != 0) continue;
      nlohmann::ordered_json j;
      j["config"] = config;
      j["ranks"] = ranks;
      j["layout"] = layout.str();
      nlohmann::ordered_json cats;
      double worst = 0.0;
      for (int k = 0; k < kNumMemoryCategories; ++k) {
        const auto cat = static_cast<MemoryCategory>(k);
        if (cat == MemoryCategory::kOther) continue;
        const double p = static_cast<double>(predicted.memory.category(cat));
        const double m = static_cast<double>(measured.value().peak_bytes[static_cast<size_t>(k)]);
        const double err = m > 0 ? (p - m) / m : (p > 0 ? 1.0 : 0.0);
        cats[memory_category_name(cat)] = {{"predicted", p}, {"measured", m}, {"error", err}};
        worst = std::max(worst, std::abs(err));
      }
      j["memory"] = cats;
      j["memory_worst_error"] = worst;
      if (predicted.memory.host_total() > 0) {  // ZeRO-Offload on a device: the host's state
        nlohmann::ordered_json host;
        for (const MemoryCategory cat : {MemoryCategory::kGradient, MemoryCategory::kOptimizerState}) {
          const double p = static_cast<double>(predicted.memory.host_peak_bytes[static_cast<size_t>(cat)]);
          const double m = static_cast<double>(measured.value().host_peak_bytes[static_cast<size_t>(cat)]);
          host[memory_category_name(cat)] = {{"predicted", p}, {"measured", m}, {"error", m > 0 ? (p - m) / m : 1.0}};
        }
        j["host_memory"] = host;
      }
      // Every rank against its own stage's prediction (rank = (stage * dp + dp rank) * tp + tp
      // rank): the largest per-rank error of any category, and where.
      double rank_worst = 0.0, rank_worst_p = 0.0, rank_worst_m = 0.0;
      std::string rank_worst_at;
      const auto& stages = predicted.memory.stage_peak_bytes;
      const auto& per_rank = measured.value().rank_peak_bytes;
      for (size_t q = 0; q < per_rank.size(); ++q) {
        const size_t stage = q / static_cast<size_t>(layout.dp * layout.ep * layout.tp);
        for (int k = 0; k < kNumMemoryCategories; ++k) {
          const auto cat = static_cast<MemoryCategory>(k);
          if (cat == MemoryCategory::kOther || stage >= stages.size()) continue;
          const double p = static_cast<double>(stages[stage][static_cast<size_t>(k)]);
          const double m = static_cast<double>(per_rank[q][static_cast<size_t>(k)]);
          const double err = m > 0 ? (p - m) / m : (p > 0 ? 1.0 : 0.0);
          if (std::abs(err) > rank_worst) {
            rank_worst = std::abs(err);
            rank_worst_p = p;
            rank_worst_m = m;
            rank_worst_at = "rank " + std::to_string(q) + " " + memory_category_name(cat);
          }
        }
      }
      // Each rank's activation bytes, predicted (its stage's) and measured: the category whose
      // model depends on the stage the most.
      nlohmann::json by_rank = nlohmann::json::array();
      for (size_t q = 0; q < per_rank.size(); ++q) {
        const size_t stage = q / static_cast<size_t>(layout.dp * layout.ep * layout.tp);
        const size_t a = static_cast<size_t>(MemoryCategory::kActivation);
        by_rank.push_back({stage < stages.size() ? stages[stage][a] : 0, per_rank[q][a]});
      }
      j["activation_by_rank"] = by_rank;
      j["memory_worst_rank_error"] = {
          {"error", rank_worst}, {"at", rank_worst_at}, {"predicted", rank_worst_p}, {"measured", rank_worst_m}};
      j["step_s"] = {{"predicted", predicted.time.step_s()}, {"measured", measured.value().step_s},
                     {"measured_cpu", measured.value().step_cpu_s}, {"measured_comm_wait", measured.value().comm_wait_s},
                     {"predicted_split", {{"compute", predicted.time.compute_s}, {"exposed_comm", predicted.time.exposed_comm_s},
                                          {"bubble", predicted.time.bubble_s}}},
                     {"error", predicted.time.step_s() / measured.value().step_s - 1.0}};
      std::printf("%s\n", j.dump().c_str());
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "plan_accuracy_bench (rank %d): %s\n", rank, e.what());
    if (world) comm::MpiRuntime::abort(1);
    return 1;
  }
  return 0;
}
