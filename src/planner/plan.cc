#include "planner/plan.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <sstream>

#include "planner/fine_tuning.h"

namespace trident::planner {
namespace {

std::string bytes_str(int64_t b) {
  char buf[32];
  const double v = static_cast<double>(b);
  if (v >= 1024.0 * 1024 * 1024) std::snprintf(buf, sizeof buf, "%.2fG", v / (1024.0 * 1024 * 1024));
  else std::snprintf(buf, sizeof buf, "%.1fM", v / (1024.0 * 1024));
  return buf;
}

// The NVMe tier's traffic and the disk time the step adds ("" without the tier): the step
// column is compute + comm + bubble + this.
std::string disk_str(const TimeEstimate& t) {
  if (t.disk.read_bytes + t.disk.written_bytes == 0) return "";
  char buf[160];
  std::snprintf(buf, sizeof buf, "  (disk %s read + %s written a step: %.3fs, %.3fs of it exposed)",
                bytes_str(t.disk.read_bytes).c_str(), bytes_str(t.disk.written_bytes).c_str(), t.disk_s,
                t.exposed_disk_s);
  return buf;
}

constexpr MemoryCategory kShown[] = {MemoryCategory::kParameter, MemoryCategory::kGradient,
                                     MemoryCategory::kOptimizerState, MemoryCategory::kActivation,
                                     MemoryCategory::kGatheredParameter};

// Note [What a prediction assumes]
// Where the frameworks differ, the planner takes the run's convention (the trainer's unless
// `plan --convention` names another: Note [Framework conventions] in planner/convention.h) and
// says so: its gradient buffers' and reductions' dtypes, which data-parallel collectives it
// overlaps and at what fraction (the cluster file's comm_overlap), its passes over the
// gradients a micro-batch, the allocator's headroom, and the collectives' algorithm (Note
// [Collectives across nodes]).
nlohmann::ordered_json assumptions_json(const Plan& plan) {
  const Convention& conv = plan.run.convention;
  const auto bytes_name = [](double b) { return std::string(b == 2.0 ? "16-bit" : "fp32"); };
  nlohmann::ordered_json j;
  j["convention"] = conv.name;
  j["gradient_buffers"] = bytes_name(conv.grad_buffer_bytes);
  j["gradient_communication"] = bytes_name(conv.grad_comm_bytes);
  // The ZeRO stages where `flags` holds, as "0,1,2" ("none": in none).
  const auto stages = [](const bool (&flags)[4]) {
    std::string r;
    for (int z = 0; z < 4; ++z) {
      if (!flags[z]) continue;
      if (!r.empty()) r.push_back(',');
      r.push_back(static_cast<char>('0' + z));
    }
    return r.empty() ? std::string("none") : r;
  };
  j["overlapped_reduction_zero_stages"] = stages(conv.overlaps_reduction);
  j["overlapped_zero3_gathers"] = conv.overlaps_gathers;
  // Note [Gathers after the gradients]: "after" exposes the backward's gathers.
  j["zero3_backward_prefetch"] =
      conv.gathers_after_gradients ? "after the gradients" : "before the gradients";
  j["comm_overlap"] = plan.cluster.device.comm_overlap;
  j["reduces_every_micro_batch_zero_stages"] = stages(conv.reduces_every_micro_batch);
  j["pipeline_scatter_gather"] = conv.pipeline_scatter_gather;
  j["allocator_headroom"] = plan.cluster.device.allocator_headroom;
  j["collectives"] = "ring inside a node, hierarchical across nodes";  // Note [Collectives across nodes]
  j["attention"] = conv.unfused_attention ? "unfused" : "flash";      // Note [Unfused attention]
  j["zero3_compute_shard"] = conv.keeps_compute_shard;
  // Note [Gradient passes a micro-batch]: whose, under ZeRO 2-3.
  j["sharded_gradient_passes"] =
      conv.fsdp_version == 0 ? "trident" : "fsdp" + std::to_string(conv.fsdp_version);
  // A mixture's routing: balanced, or a run's counts (Note [Measured expert load]).
  if (plan.run.shapes.experts > 0) {
    const ExpertLoad& load = plan.run.expert_load;
    j["expert_routing"] = load.empty() ? std::string("balanced")
                                       : "measured (" + std::to_string(load.layers.begin()->second.size()) + " steps)";
  }
  return j;
}

std::string assumptions_line(const Plan& plan) {
  const nlohmann::ordered_json j = assumptions_json(plan);
  const bool gathers_after_gradients = plan.run.convention.gathers_after_gradients;
  char line[512];
  std::snprintf(
      line, sizeof line,
      "assumes: %s's conventions: %s gradient buffers, gradients reduced in %s, overlapped at "
      "comm_overlap %.2f in ZeRO stage(s) %s%s; %s attention; allocator headroom %.0f%%; "
      "collectives %s\n",
      j["convention"].get<std::string>().c_str(), j["gradient_buffers"].get<std::string>().c_str(),
      j["gradient_communication"].get<std::string>().c_str(), j["comm_overlap"].get<double>(),
      j["overlapped_reduction_zero_stages"].get<std::string>().c_str(),
      !j["overlapped_zero3_gathers"].get<bool>() ? ""
      : gathers_after_gradients
          ? " and ZeRO-3's forward gathers (the backward's after the gradients, exposed)"
          : " and ZeRO-3's gathers",
      j["attention"].get<std::string>().c_str(), 100.0 * j["allocator_headroom"].get<double>(),
      j["collectives"].get<std::string>().c_str());
  std::string out = line;
  if (j.contains("expert_routing"))
    out.insert(out.size() - 1, "; experts' routing " + j["expert_routing"].get<std::string>());
  return out;
}

}  // namespace

Candidate evaluate(const RunSpec& run, const Layout& layout, const Cluster& cluster, bool communicator) {
  Candidate c;
  c.layout = layout;
  c.memory = predict_memory(run, layout, communicator);
  c.time = predict_time(run, layout, cluster);
  c.tokens_per_s = static_cast<double>(run.tokens_per_step()) / c.time.step_s();
  c.host_fits = cluster.host_fits(c.memory.host_total(), layout.ranks());
  c.tp_crosses_nodes = layout.tp > 1 && cluster.crosses_nodes(layout.tp, layout.ranks());
  c.fits = cluster.device_fits(c.memory.total()) && c.host_fits;
  return c;
}

Plan make_plan(const RunSpec& run, const Cluster& cluster, const SearchSpace& space, bool communicator) {
  const auto start = std::chrono::steady_clock::now();
  Plan plan;
  plan.run = run;
  plan.cluster = cluster;
  plan.ranks = space.ranks;
  plan.pins = space.pins;
  const std::vector<Layout> layouts = enumerate_layouts(run, space);
  plan.layouts = static_cast<int64_t>(layouts.size());
  std::vector<Candidate> seen;
  plan.search = search(layouts, [&](const Layout& l) -> std::optional<double> {
    seen.push_back(evaluate(run, l, cluster, communicator));
    if (!seen.back().fits) return std::nullopt;
    return seen.back().tokens_per_s;
  });
  std::stable_sort(seen.begin(), seen.end(), [](const Candidate& a, const Candidate& b) {
    if (a.fits != b.fits) return a.fits;
    if (a.fits && a.tokens_per_s != b.tokens_per_s) return a.tokens_per_s > b.tokens_per_s;
    if (a.fits) return a.memory.total() < b.memory.total();  // as fast: the one that leaves more room
    return a.memory.total() < b.memory.total();
  });
  plan.ranked = std::move(seen);
  plan.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return plan;
}

int64_t Plan::fitting() const {
  return std::count_if(ranked.begin(), ranked.end(), [](const Candidate& c) { return c.fits; });
}

std::string no_layout_reason(const Plan& plan) {
  const RunSpec& r = plan.run;
  std::ostringstream s;
  // Nothing to rank: say which rule of enumerate_layouts left no layout, not that none fits.
  if (plan.ranked.empty() && !plan.pins.empty())
    s << why_no_pinned_layout(r, plan.ranks, plan.pins);
  else if (plan.ranked.empty())
    s << "no layout of " << plan.ranks << " rank(s) exists for this run: dp x tp x pp must be " << plan.ranks
      << ", with dp dividing the " << r.global_batch << " sequences of a step (data.batch_size x grad_accum_steps), tp the "
      << r.model.n_head << " heads, pp at most the " << r.model.n_layer
      << " layers and no more than the micro-batches: fewer ranks, or a larger batch";
  else
    s << "no layout fits " << plan.cluster.device.memory_gib << " GiB per device on " << plan.ranks
      << " rank(s): more ranks, or a smaller batch or model";
  // ZeRO-Offload's layouts that fit the device but not the node's host memory: name the one
  // that needs the least of it, per node as Cluster::host_fits counts it.
  const Candidate* device_only = nullptr;
  for (const Candidate& c : plan.ranked)
    if (!c.host_fits && plan.cluster.device_fits(c.memory.total()) &&
        (device_only == nullptr || c.memory.host_total() < device_only->memory.host_total()))
      device_only = &c;
  if (device_only != nullptr) {
    const int64_t on_a_node = std::min<int64_t>(device_only->layout.ranks(), plan.cluster.shape.devices_per_node);
    char host[200];
    std::snprintf(host, sizeof host,
                  "needs %.1f GiB of host memory per node (%lld rank(s) x %.1f GiB), beyond the cluster's "
                  "host_memory_gib = %g",
                  static_cast<double>(device_only->memory.host_total() * on_a_node) / (1024.0 * 1024.0 * 1024.0),
                  static_cast<long long>(on_a_node),
                  static_cast<double>(device_only->memory.host_total()) / (1024.0 * 1024.0 * 1024.0),
                  plan.cluster.shape.host_memory_gib);
    s << " (with ZeRO-Offload, " << device_only->layout.str() << " fits the device but " << host << ")";
  }
  return s.str();
}

std::string plan_table(const Plan& plan, int64_t top) {
  std::ostringstream s;
  const RunSpec& r = plan.run;
  char line[512];
  // A fine-tuning run says how much of it trains (Note [The planner's fine-tuning]).
  char count[96];
  std::snprintf(count, sizeof count, "%.1fM parameters", static_cast<double>(r.shapes.num_parameters()) / 1e6);
  std::string parameters = count;
  if (!r.holding.empty()) {
    std::snprintf(count, sizeof count, ", %.2fM trained", static_cast<double>(trained_parameters(r)) / 1e6);
    parameters += count;
  }
  std::snprintf(line, sizeof line,
                "plan: %s L=%lld C=%lld V=%lld (%s), T=%lld, %lld sequences per step, %s, on %lld rank(s) "
                "of %s (%.0f GiB each)\n",
                r.model.arch.c_str(), static_cast<long long>(r.model.n_layer), static_cast<long long>(r.model.n_embd),
                static_cast<long long>(r.model.vocab_size), parameters.c_str(),
                static_cast<long long>(r.seq_len), static_cast<long long>(r.global_batch), dtype_name(r.compute),
                static_cast<long long>(plan.ranks), plan.cluster.shape.name.c_str(), plan.cluster.device.memory_gib);
  s << line;
  std::snprintf(line, sizeof line, "%lld layouts, %lld evaluated (%s) in %.2f s, %lld fit\n",
                static_cast<long long>(plan.layouts), static_cast<long long>(plan.search.evaluated),
                plan.search.exhaustive ? "exhaustive" : "simulated annealing", plan.seconds,
                static_cast<long long>(plan.fitting()));
  s << line;
  if (!plan.pins.empty()) s << "pinned: " << plan.pins.str() << " (the search ranges over the other axes)\n";
  s << assumptions_line(plan);
  s << "\n";
  std::snprintf(line, sizeof line, "%-4s %-44s %8s %8s %8s %8s %8s %9s | %9s %9s %9s %9s | %11s\n", "#", "layout",
                "param", "grad", "optim", "activ", "gather", "total", "compute", "comm", "bubble", "step", "tokens/s");
  s << line;
  int64_t shown = 0;
  for (const Candidate& c : plan.ranked) {
    if (shown >= top) break;
    ++shown;
    std::snprintf(line, sizeof line, "%-4lld %-44s", static_cast<long long>(shown), c.layout.str().c_str());
    s << line;
    for (MemoryCategory cat : kShown) {
      std::snprintf(line, sizeof line, " %8s", bytes_str(c.memory.category(cat)).c_str());
      s << line;
    }
    // ZeRO-Offload on a device: the state the host keeps instead (Note [ZeRO-Offload's memory]).
    const std::string host = c.memory.host_total() > 0 ? "  (host " + bytes_str(c.memory.host_total()) + ")" : "";
    std::snprintf(line, sizeof line, " %9s | %8.3fs %8.3fs %8.3fs %8.3fs | %11.0f%s%s%s%s\n",
                  bytes_str(c.memory.total()).c_str(), c.time.compute_s, c.time.exposed_comm_s, c.time.bubble_s,
                  c.time.step_s(), c.tokens_per_s, host.c_str(), disk_str(c.time).c_str(),
                  c.fits ? "" : c.host_fits ? "  (does not fit)" : "  (does not fit the host's memory)",
                  c.tp_crosses_nodes ? "  (tp across nodes)" : "");
    s << line;
  }
  if (!plan.ranked.empty() && plan.ranked.front().fits) {
    s << "\nbest: " << plan.ranked.front().layout.str() << "\nrun it with:";
    for (const std::string& o : plan.ranked.front().layout.overrides()) s << " " << o;
    s << "\n";
  } else {
    s << "\n" << no_layout_reason(plan) << "\n";
  }
  return s.str();
}

nlohmann::ordered_json candidate_json(const Candidate& c) {
  nlohmann::ordered_json j;
  const Layout& l = c.layout;
  j["layout"] = {{"dp", l.dp}, {"ep", l.ep}, {"tp", l.tp}, {"pp", l.pp}, {"virtual_stages", l.virtual_stages},
                 {"zero_stage", l.zero_stage}, {"activation_checkpointing", l.checkpointing},
                 {"micro_batch", l.micro_batch}, {"grad_accum_steps", l.accum}, {"offload", l.offload},
                 {"offload_device", l.nvme ? "nvme" : "cpu"}, {"sequence_parallel", l.sequence_parallel}};
  j["name"] = l.str();
  for (MemoryCategory cat : kShown) j["memory_bytes"][memory_category_name(cat)] = c.memory.category(cat);
  j["memory_bytes"]["total"] = c.memory.total();
  if (c.memory.host_total() > 0) {  // ZeRO-Offload on a device: what the host keeps instead
    for (MemoryCategory cat : kShown) j["host_memory_bytes"][memory_category_name(cat)] = c.memory.host_peak_bytes[static_cast<size_t>(cat)];
    j["host_memory_bytes"]["total"] = c.memory.host_total();
  }
  j["fits"] = c.fits;
  j["tp_crosses_nodes"] = c.tp_crosses_nodes;
  if (c.memory.host_total() > 0) j["host_fits"] = c.host_fits;
  j["time_s"] = {{"compute", c.time.compute_s}, {"exposed_comm", c.time.exposed_comm_s}, {"bubble", c.time.bubble_s},
                 {"exposed_disk", c.time.exposed_disk_s}, {"step", c.time.step_s()}, {"recompute", c.time.recompute_s},
                 {"comm_total", c.time.comm_total_s}, {"disk", c.time.disk_s}};
  const ComputeParts& p = c.time.parts;
  j["time_parts_s"] = {{"products", p.products},
                       {"experts", p.experts},
                       {"attention", p.attention},
                       {"memory", p.memory},
                       {"adapters", p.adapters},
                       {"head", p.head},
                       {"loss", p.loss},
                       {"recompute", p.recompute},
                       {"optimizer", p.optimizer},
                       {"accumulate", p.accumulate},
                       {"dp_exposed", c.time.dp_exposed_s},
                       {"tp", c.time.tp_s},
                       {"ep", c.time.ep_s},
                       {"skew", c.time.skew_s},
                       {"pp_exposed", c.time.pp_exposed_s},
                       {"bubble", c.time.bubble_s},
                       {"exposed_disk", c.time.exposed_disk_s}};
  // The NVMe tier's bytes per rank and step (Note [The tier's memory and bytes]).
  if (l.nvme) j["disk_bytes"] = {{"read", c.time.disk.read_bytes}, {"written", c.time.disk.written_bytes}};
  j["tokens_per_s"] = c.tokens_per_s;
  j["overrides"] = l.overrides();
  return j;
}

std::string time_breakdown(const Candidate& c) {
  const TimeEstimate& t = c.time;
  const ComputeParts& p = t.parts;
  const std::pair<const char*, double> rows[] = {
      {"block products (projections, dense MLPs, routers)", p.products},
      {"expert products (a mixture's grouped GEMMs)", p.experts},
      {"attention kernel", p.attention},
      {"memory-bound ops (norms, activations, rope, embedding)", p.memory},
      {"adapters (LoRA's factors, their scaling and adding)", p.adapters},
      {"head products", p.head},
      {"loss (its passes over the logits, the head's dw)", p.loss},
      {"recompute (activation checkpointing's rerun)", p.recompute},
      {"optimizer (AdamW; ZeRO-Offload's transfers)", p.optimizer},
      {"gradients accumulated, folded, copied to buckets", p.accumulate},
      {"data parallelism and ZeRO, exposed", t.dp_exposed_s},
      {"tensor parallelism's all-reduces", t.tp_s},
      {"expert parallelism's exchanges", t.ep_s},
      {"waits for the slowest rank at those collectives", t.skew_s},
      {"pipeline messages, exposed", t.pp_exposed_s},
      {"pipeline bubble", t.bubble_s},
      {"NVMe tier's disk, exposed", t.exposed_disk_s},
  };
  std::ostringstream s;
  char line[256];
  std::snprintf(line, sizeof line, "step of %s by part (the slowest stage, per step):\n", c.layout.str().c_str());
  s << line;
  const double step = t.step_s();
  for (const auto& [what, seconds] : rows) {
    if (seconds <= 0.0) continue;
    std::snprintf(line, sizeof line, "  %-56s %9.4f s %6.1f%%\n", what, seconds, step > 0.0 ? 100.0 * seconds / step : 0.0);
    s << line;
  }
  std::snprintf(line, sizeof line, "  %-56s %9.4f s\n", "step", step);
  s << line;
  if (t.comm_total_s > t.exposed_comm_s)
    s << "  (of " << t.comm_total_s << " s of communication, " << t.comm_total_s - t.exposed_comm_s
      << " s hides behind compute)\n";
  return s.str();
}

nlohmann::ordered_json plan_json(const Plan& plan, int64_t top) {
  nlohmann::ordered_json j;
  j["model"] = {{"arch", plan.run.model.arch}, {"n_layer", plan.run.model.n_layer}, {"n_embd", plan.run.model.n_embd},
                {"n_head", plan.run.model.n_head}, {"vocab_size", plan.run.model.vocab_size},
                {"parameters", plan.run.shapes.num_parameters()}, {"trained_parameters", trained_parameters(plan.run)}};
  j["seq_len"] = plan.run.seq_len;
  j["global_batch"] = plan.run.global_batch;
  j["dtype"] = dtype_name(plan.run.compute);
  j["ranks"] = plan.ranks;
  j["cluster"] = plan.cluster.shape.name;
  j["layouts"] = plan.layouts;
  j["pinned"] = plan.pins.str();
  j["evaluated"] = plan.search.evaluated;
  j["search"] = plan.search.exhaustive ? "exhaustive" : "annealing";
  j["seconds"] = plan.seconds;
  j["assumes"] = assumptions_json(plan);
  // Every layout the search evaluated, best first (`ranked` holds the first --top of them).
  nlohmann::ordered_json names = nlohmann::ordered_json::array();
  for (const Candidate& c : plan.ranked) names.push_back(c.layout.str());
  j["evaluated_layouts"] = names;
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (int64_t i = 0; i < std::min<int64_t>(top, static_cast<int64_t>(plan.ranked.size())); ++i)
    list.push_back(candidate_json(plan.ranked[static_cast<size_t>(i)]));
  j["ranked"] = list;
  return j;
}

}  // namespace trident::planner
