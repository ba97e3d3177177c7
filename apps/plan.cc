// `trident plan`, `trident calibrate` and `trident train --parallel.auto=true`: the planner
// (planner/plan.h) from the command line.
#include <cstdio>
#include <filesystem>

#include "checkpoint/atomic_file.h"
#include "checkpoint/env.h"
#include "cli_checks.h"
#include "commands.h"
#include "comm/mpi_communicator.h"
#include "planner/calibrate.h"
#include "planner/nvme_tier.h"
#include "planner/plan.h"

namespace trident::cli {
namespace {

// The cluster a plan is for: the file's (with `nodes` of its nodes, 0: the file's count), or
// `ranks` ranks of this machine; `ranks` 0 means the cluster's devices (or 1).
// `ranks_from` names where a given `ranks` came from, for the error.
StatusOr<planner::Cluster> plan_cluster(const std::string& file, int64_t& ranks, int64_t nodes = 0,
                                        const std::string& ranks_from = "--ranks") {
  if (file.empty()) {
    if (nodes > 0)
      return Status::invalid("--nodes " + std::to_string(nodes) +
                             " needs --cluster: a cluster file describing one node (configs/clusters/)");
    if (ranks == 0) ranks = 1;
    return planner::local_cluster(ranks);
  }
  auto c = planner::load_cluster(file);
  if (!c.is_ok()) return c.status();
  if (nodes > 0) c.value().shape.nodes = nodes;
  if (ranks == 0) ranks = c.value().devices();
  if (ranks > c.value().devices())
    return Status::invalid(ranks_from + " " + std::to_string(ranks) + " is more than the " +
                           std::to_string(c.value().devices()) + " devices of --cluster " + file + " (" +
                           std::to_string(c.value().shape.nodes) + " nodes x " +
                           std::to_string(c.value().shape.devices_per_node) + "): --nodes " +
                           std::to_string((ranks + c.value().shape.devices_per_node - 1) /
                                          c.value().shape.devices_per_node) +
                           " plans that many of its nodes");
  return c;
}

// The run's config from a file and overrides, checked (as trident train reads it).
StatusOr<train::TrainConfig> read_config(const std::string& file, const std::vector<std::string>& overrides) {
  train::TrainConfig cfg;
  config::ConfigTree tree;
  cfg.bind(tree);
  if (Status s = load_config(tree, file, overrides); !s.is_ok()) return s;
  cfg.validate();
  return cfg;
}

planner::SearchSpace space_for(int64_t ranks, const planner::Cluster& cluster, bool offload, bool nvme = false,
                               const planner::LayoutPins& pins = {}) {
  planner::SearchSpace space;
  space.ranks = ranks;
  space.offload = offload;
  space.nvme = nvme;
  space.max_tp = cluster.shape.devices_per_node;  // tensor parallelism within a node (Megatron's rule)
  space.pins = pins;
  return space;
}

// Whether the run names the NVMe tier (a disk under parallel.nvme_path for its optimizer state):
// its layouts are then planned too.
bool names_tier(const train::TrainConfig& cfg) { return cfg.parallel.offload_optimizer_device == "nvme"; }

// Where a plan's cluster came from (`file` given by `flag`), for messages.
std::string cluster_source(const std::string& file, const std::string& flag = "--cluster") {
  return file.empty() ? "this machine's uncalibrated cluster (no " + flag + ")" : flag + " " + file;
}

}  // namespace

CLI::App* add_plan(CLI::App& app, PlanArgs& a) {
  CLI::App* c = app.add_subcommand(
      "plan", "Predict memory and step time of every parallel layout of a run, ranked by tokens/s among those that fit");
  c->add_option("--config", a.config_file, "TOML training config (as trident train's)")->check(CLI::ExistingFile);
  c->add_option("--ranks", a.ranks, "ranks (devices) to plan for (default: the cluster's devices, or 1)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  c->add_option("--nodes", a.nodes, "nodes of the --cluster file's kind (default: the file's nodes)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16));
  c->add_option("--cluster", a.cluster_file,
                "cluster file (configs/clusters/*.toml, or trident calibrate's); default: this machine, uncalibrated")
      ->check(CLI::ExistingFile);
  c->add_flag("--json", a.json, "print JSON instead of a table");
  c->add_option("--top", a.top, "layouts to print")->check(CLI::Range(int64_t{1}, int64_t{100000}));
  c->add_flag("--explain", a.explain,
              "after the table, the first layout's step by what runs it (the products, attention, "
              "memory-bound ops, head, loss, optimizer, each collective), as train.profile_step "
              "groups a measured step; --json gives every layout's parts as time_parts_s instead");
  c->add_flag("--offload", a.offload, "also consider ZeRO-Offload (optimizer state in host memory)");
  c->add_flag("--nvme", a.nvme,
              "also consider the NVMe tier (ZeRO's optimizer state on a disk, parallel.offload_optimizer_device = "
              "nvme, which does the same; it needs the cluster's disk_read_gbs and disk_write_gbs)");
  c->add_option("--layout", a.layout,
                "pin these axes, as the table writes a layout (\"dp8 tp4+sp pp2x2 zero1 ckpt=full b2 m8\", any of "
                "its words): the search ranges over the rest; --parallel.* and --model.activation_checkpointing "
                "overrides pin their axes too");
  c->add_option("--comm-overlap", a.comm_overlap,
                "the fraction of the compute that an overlapped data-parallel or ZeRO collective hides behind "
                "(NCCL on its own stream: near 1); default: the cluster file's device.comm_overlap")
      ->check(CLI::Range(0.0, 1.0));
  c->add_option(
      "--convention", a.convention,
      "plan the run as this framework runs it where frameworks differ (gradient dtypes, which "
      "collectives overlap, when gradients are reduced, pipeline messages): trident (the trainer), "
      "megatron, fsdp (FSDP2, torchtitan), composer (FSDP1 with BACKWARD_POST prefetch, "
      "llm-foundry) or deepspeed");
  c->add_option("--attention", a.attention,
                "the framework's attention kernel: flash (fused, no scores kept: trident's, FlashAttention, "
                "cuDNN's) or unfused (its T x T scores through memory, as SC'21's Megatron)")
      ->check(CLI::IsMember({"flash", "unfused"}));
  c->add_option("--expert-load", a.expert_load,
                "a mixture of experts' routing as a run measured it: that run's metrics.jsonl (its per-expert counts, "
                "\"moe_layers\"); expert parallelism's step then waits for its busiest rank's experts (default: "
                "balanced routing)")
      ->check(CLI::ExistingFile);
  c->add_option("--tokens", a.tokens, "with --price-per-device-hour: time and cost to train this many tokens")
      ->check(kPositive);
  c->add_option("--price-per-device-hour", a.price_per_device_hour, "price of one device for an hour")
      ->check(kPositive);
  c->allow_extras();
  c->footer("Takes the training config's --section.key=value overrides; prints the overrides that run each layout.");
  return c;
}

Status run_plan(const PlanArgs& a, const std::vector<std::string>& overrides) {
  auto read = read_config(a.config_file, overrides);
  if (!read.is_ok()) return read.status();
  const train::TrainConfig& cfg = read.value();
  // Pinned axes (Note [Pinned layouts]): --layout's words over the overrides' keys.
  planner::LayoutPins pins = planner::pins_from_overrides(cfg, overrides);
  if (!a.layout.empty()) {
    auto parsed = planner::parse_layout_pins(a.layout);
    if (!parsed.is_ok()) return parsed.status();
    pins = parsed.value().over(pins);
  }
  // dp, tp and pp pinned name the ranks; --ranks, if given, must agree (the reason says so).
  int64_t ranks = a.ranks == 0 ? pins.ranks() : a.ranks;
  auto cluster = plan_cluster(a.cluster_file, ranks, a.nodes,
                              a.ranks == 0 && ranks > 0 ? "--layout's dp x tp x pp" : "--ranks");
  if (!cluster.is_ok()) return cluster.status();
  if (a.comm_overlap >= 0.0) cluster.value().device.comm_overlap = a.comm_overlap;
  planner::RunSpec run = planner::run_spec(cfg);
  if (cluster.value().gpu()) run.place_on_device();
  auto convention = planner::convention_named(a.convention, run.compute, cfg.parallel.grad_compression);
  if (!convention.is_ok()) return convention.status();
  run.convention = std::move(convention).value();
  run.convention.unfused_attention = a.attention == "unfused";
  if (!a.expert_load.empty()) {
    if (run.shapes.experts == 0)
      return Status::invalid("--expert-load " + a.expert_load + ": the planned model has no mixture of experts "
                             "(model.num_local_experts)");
    auto load = planner::read_expert_load(a.expert_load, run.shapes);
    if (!load.is_ok()) return load.status();
    run.expert_load = std::move(load).value();
  }
  if (a.convention == "trident" && (cfg.parallel.grad_compression == "powersgd" || cfg.parallel.grad_compression == "onebit_adam"))
    std::fprintf(stderr,
                 "plan: parallel.grad_compression = %s is priced uncompressed (its warm-up's fp32 all-reduce): "
                 "an upper bound on its data-parallel time\n",
                 cfg.parallel.grad_compression.c_str());
  const bool tier = a.nvme || names_tier(cfg) || pins.nvme.value_or(false);
  if (tier)
    if (Status s = planner::check_disk_rates(cluster.value(), cluster_source(a.cluster_file)); !s.is_ok()) return s;
  const planner::Plan plan = planner::make_plan(
      run, cluster.value(), space_for(ranks, cluster.value(), a.offload, tier, pins), ranks > 1);
  const bool cost = a.tokens > 0 && a.price_per_device_hour > 0;
  if (a.json) {
    nlohmann::ordered_json j = planner::plan_json(plan, a.top);
    if (cost)
      for (auto& c : j["ranked"]) {
        const double hours = a.tokens / c["tokens_per_s"].get<double>() / 3600.0;
        c["train_hours"] = hours;
        c["train_cost"] = hours * static_cast<double>(ranks) * a.price_per_device_hour;
      }
    std::printf("%s\n", j.dump(2).c_str());
    return Status::ok();
  }
  std::printf("%s", planner::plan_table(plan, a.top).c_str());
  if (a.explain && !plan.ranked.empty()) std::printf("\n%s", planner::time_breakdown(plan.ranked.front()).c_str());
  if (run.on_device && !a.offload && plan.fitting() == 0 && !plan.ranked.empty())
    std::printf("(--offload lists ZeRO-Offload's layouts too: the optimizer state on the host)\n");
  if (a.cluster_file.empty())
    std::printf("(times use this machine's uncalibrated defaults: `trident calibrate` writes a file for --cluster)\n");
  if (cost) {
    std::printf("\nto train %.3g tokens at %.2f per device-hour on %lld devices:\n", a.tokens, a.price_per_device_hour,
                static_cast<long long>(ranks));
    int64_t shown = 0;
    for (const planner::Candidate& c : plan.ranked) {
      if (!c.fits || shown++ >= std::min<int64_t>(a.top, 5)) break;
      const double hours = a.tokens / c.tokens_per_s / 3600.0;
      std::printf("  %-44s %10.1f hours %14.2f\n", c.layout.str().c_str(), hours,
                  hours * static_cast<double>(ranks) * a.price_per_device_hour);
    }
  }
  return Status::ok();
}

CLI::App* add_calibrate(CLI::App& app, CalibrateArgs& a) {
  CLI::App* c = app.add_subcommand(
      "calibrate",
      "Measure this machine's GEMM, attention, memory and MPI rates for the planner (a cluster file), and with "
      "--parallel.nvme_path=DIR the NVMe tier's disk there");
  c->add_option("--config", a.config_file, "TOML training config (the model's shapes, train.threads)")
      ->check(CLI::ExistingFile);
  c->add_option("--out", a.out, "the cluster file to write");
  c->allow_extras();
  c->footer("Run under mpirun -np N (trident launch -n N) to measure the collectives between N ranks (and the disk "
            "as N ranks share it).");
  return c;
}

Status run_calibrate(const CalibrateArgs& a, const std::vector<std::string>& overrides) {
  // Checked before minutes of measuring: --out over the config replaced the training config
  // with a cluster file.
  if (!a.config_file.empty() && resolved_path(a.out) == resolved_path(a.config_file))
    return Status::invalid("calibrate: --out '" + a.out + "' is the --config file it reads ('" + a.config_file +
                           "'): choose another --out for the cluster file");
  auto read = read_config(a.config_file, overrides);
  if (!read.is_ok()) return read.status();
  const train::TrainConfig& cfg = read.value();
  std::shared_ptr<comm::Communicator> world;
  if (comm::MpiRuntime::launched_by_mpirun()) world = comm::MpiRuntime::world();
  const planner::Cluster c = planner::calibrate(cfg, world);
  if (world && world->rank() != 0) return Status::ok();
  const std::string text = "# trident calibrate: " + c.shape.name + "\n" + c.to_toml();
  auto written = checkpoint::write_file_atomically(checkpoint::default_env(), a.out, text);
  if (!written.is_ok()) return written.status();
  std::printf("%swrote %s\n", text.c_str(), a.out.c_str());
  return Status::ok();
}

Status apply_auto_layout(train::TrainConfig& cfg, int ranks, bool print) {
  int64_t n = ranks;
  auto cluster = plan_cluster(cfg.parallel.auto_cluster, n);
  if (!cluster.is_ok()) return cluster.status();
  planner::RunSpec run = planner::run_spec(cfg);
  if (cluster.value().gpu()) run.place_on_device();
  planner::Plan plan = planner::make_plan(run, cluster.value(), space_for(n, cluster.value(), false), ranks > 1);
  const auto none_fits = [](const planner::Plan& p) { return p.ranked.empty() || !p.ranked.front().fits; };
  // ZeRO-Offload only where no layout fits the devices without it: it trades step time (the
  // optimizer on the host, gradients and weights over PCIe) for device memory, and DeepSpeed
  // too turns it on for models that do not fit otherwise. It keeps state beside devices only.
  bool offloaded = false;
  if (none_fits(plan) && !plan.ranked.empty() && run.on_device) {
    planner::Plan with = planner::make_plan(run, cluster.value(), space_for(n, cluster.value(), true), ranks > 1);
    offloaded = !none_fits(with);
    plan = std::move(with);  // when none fits either, its reason names the host's memory too
  }
  // The NVMe tier likewise, where the config names it (a disk for the state): slower than
  // memory, so chosen only when nothing fits without it (beside GPUs, nor with ZeRO-Offload:
  // the host's memory is short too). It needs ZeRO, and so a communicator: one process started
  // alone has none.
  bool tiered = false;
  const bool zero_runs = ranks > 1 || comm::MpiRuntime::launched_by_mpirun();
  const bool tier = names_tier(cfg) && zero_runs;
  if (none_fits(plan) && !plan.ranked.empty() && tier) {
    const std::string source = cluster_source(cfg.parallel.auto_cluster, "parallel.auto_cluster");
    if (Status s = planner::check_disk_rates(cluster.value(), source); !s.is_ok())
      return Status::invalid("parallel.auto: no layout fits without the NVMe tier (parallel.offload_optimizer_device "
                             "= \"nvme\"), and " + s.message());
    planner::Plan with =
        planner::make_plan(run, cluster.value(), space_for(n, cluster.value(), run.on_device, true), zero_runs);
    tiered = !none_fits(with);
    plan = std::move(with);
  }
  if (none_fits(plan)) {
    const char* also = tier && !plan.ranked.empty()            ? " (the NVMe tier's layouts too)"
                       : run.on_device && !plan.ranked.empty() ? " (ZeRO-Offload's layouts too)"
                                                               : "";
    return Status::invalid(std::string("parallel.auto") + also + ": " + planner::no_layout_reason(plan) +
                           " (trident plan lists them)");
  }
  const planner::Candidate& best = plan.ranked.front();
  best.layout.apply(cfg);
  if (print) {
    if (offloaded)
      std::fprintf(stderr, "parallel.auto: no layout fits the devices' memory without ZeRO-Offload; choosing among those "
                           "with it (the optimizer state on the host: %.1f GiB per rank)\n",
                   static_cast<double>(best.memory.host_total()) / (1024.0 * 1024.0 * 1024.0));
    if (tiered)
      std::fprintf(stderr, "parallel.auto: no layout fits the memory without the NVMe tier; choosing among those with it "
                           "(the optimizer state on disk: %.1f MiB of it in memory, %.1f + %.1f MiB read and written "
                           "a step)\n",
                   static_cast<double>(best.memory.category(MemoryCategory::kOptimizerState) +
                                       best.memory.host_peak_bytes[static_cast<size_t>(MemoryCategory::kOptimizerState)]) /
                       (1024.0 * 1024.0),
                   static_cast<double>(best.time.disk.read_bytes) / (1024.0 * 1024.0),
                   static_cast<double>(best.time.disk.written_bytes) / (1024.0 * 1024.0));
    std::fprintf(stderr, "parallel.auto: %s on %d rank(s), the fastest of the %lld layouts that fit, of %lld evaluated (%s):\n",
                 best.layout.str().c_str(), ranks, static_cast<long long>(plan.fitting()),
                 static_cast<long long>(plan.search.evaluated), cluster.value().shape.name.c_str());
    char disk[64] = "";
    if (best.layout.nvme) std::snprintf(disk, sizeof disk, " + exposed disk %.3f", best.time.exposed_disk_s);
    std::fprintf(stderr, "  predicted %.0f tokens/s: step %.3f s = compute %.3f + exposed communication %.3f + bubble %.3f%s; "
                 "%.1f MiB per rank\n",
                 best.tokens_per_s, best.time.step_s(), best.time.compute_s, best.time.exposed_comm_s, best.time.bubble_s,
                 disk, static_cast<double>(best.memory.total()) / (1024.0 * 1024.0));
    for (size_t i = 1; i < std::min<size_t>(plan.ranked.size(), 3); ++i)
      std::fprintf(stderr, "  next: %s, %.0f tokens/s\n", plan.ranked[i].layout.str().c_str(), plan.ranked[i].tokens_per_s);
    std::string o;
    for (const std::string& s : best.layout.overrides()) o += " " + s;
    std::fprintf(stderr, "  the same as:%s\n", o.c_str());
  }
  return Status::ok();
}

}  // namespace trident::cli
