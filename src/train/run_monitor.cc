#include "train/run_monitor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <numeric>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "checkpoint/atomic_file.h"
#include "checkpoint/env.h"
#include "comm/flight_diagnosis.h"
#include "comm/flight_recorder.h"
#include "core/allocator.h"
#include "monitor/monitor_options.h"
#include "monitor/notification_queue.h"
#include "monitor/nvml.h"
#include "train/stop_request.h"

namespace trident::train {
namespace {

using Clock = std::chrono::steady_clock;

// The local rank (this host's ranks count from 0) from the launcher's environment, else the rank.
int local_rank(int rank) {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK"})
    if (const char* v = std::getenv(name); v != nullptr && *v != '\0') return std::atoi(v);
  return rank;
}

double wall_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double hang_grace_s(const monitor::AlertRule& rule) { return std::max(rule.timeout, 10.0); }

std::string hang_dump_path(const std::string& out_dir, int rank) {
  return out_dir + "/hang_rank" + std::to_string(rank) + ".json";
}

std::string hang_summary_path(const std::string& out_dir) { return out_dir + "/hang_summary.json"; }

void write_or_say(const std::string& path, const std::string& text, int rank) {
  auto w = checkpoint::write_file_atomically(checkpoint::default_env(), path, text + "\n");
  if (!w.is_ok()) std::fprintf(stderr, "rank %d: could not write %s: %s\n", rank, path.c_str(), w.status().to_string().c_str());
}

// A rank's flight record from its hang dump, if the dump is there and complete.
std::optional<std::vector<comm::FlightRecord>> read_hang_dump(const std::string& path) {
  auto text = checkpoint::read_file(checkpoint::default_env(), path);
  if (!text.is_ok()) return std::nullopt;
  const nlohmann::json j = nlohmann::json::parse(text.value(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("flight_record") || !j["flight_record"].is_array()) return std::nullopt;
  std::vector<comm::FlightRecord> records;
  for (const nlohmann::json& r : j["flight_record"]) {
    comm::FlightRecord f;
    f.comm = r.value("comm", 0);
    f.comm_size = r.value("comm_size", 0);
    f.seq = r.value("seq", int64_t{0});
    f.op = r.value("op", std::string());
    f.bytes = r.value("bytes", int64_t{0});
    f.started_s = r.value("started_s", 0.0);
    f.completed = r.value("state", std::string()) == "completed";
    records.push_back(f);
  }
  return records;
}

// Rank 0: waits (at most the grace) for every rank's dump, then says who is behind.
nlohmann::ordered_json hang_summary(const std::string& out_dir, int world, double grace_s, int64_t step) {
  std::map<int, std::vector<comm::FlightRecord>> records;
  const auto deadline = Clock::now() + std::chrono::duration<double>(grace_s);
  for (;;) {
    for (int r = 0; r < world; ++r)
      if (records.count(r) == 0)
        if (auto got = read_hang_dump(hang_dump_path(out_dir, r))) records[r] = std::move(*got);
    if (static_cast<int>(records.size()) == world || Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const comm::FlightDiagnosis d = comm::diagnose_flight_records(records);
  nlohmann::ordered_json summary = {{"step", step}, {"ranks", world}, {"dumps_from", nlohmann::json::array()},
                                    {"dumps_missing", nlohmann::json::array()}, {"text", d.text}};
  for (int r = 0; r < world; ++r) summary[records.count(r) ? "dumps_from" : "dumps_missing"].push_back(r);
  if (d.found)
    summary["behind"] = {{"comm", d.comm},           {"comm_size", d.comm_size},       {"ranks", d.behind},
                         {"last_seq", d.behind_seq}, {"last_op", d.behind_op},         {"last_state", d.behind_state},
                         {"ahead", d.ahead},         {"waited_seq", d.behind_seq + 1}, {"waited_op", d.waited_op}};
  if (!summary["dumps_missing"].empty())  // stuck too hard to dump, or another host's out_dir
    summary["text"] = "no dump from ranks " + summary["dumps_missing"].dump() + " within " +
                      std::to_string(static_cast<int>(grace_s)) + " s (look at them first); of the others: " + d.text;
  return summary;
}

}  // namespace

RunMonitor::RunMonitor(const TrainConfig& cfg, int rank, const parallel::DeviceMesh* mesh, Device device)
    : cfg_(cfg), rank_(rank), mesh_(mesh), device_(device) {}

RunMonitor::~RunMonitor() = default;

StatusOr<std::unique_ptr<RunMonitor>> RunMonitor::start(const TrainConfig& cfg, int rank,
                                                        const parallel::DeviceMesh* mesh, Device device) {
  std::unique_ptr<RunMonitor> m(new RunMonitor(cfg, rank, mesh, device));
  m->status_.steps = cfg.train.steps;
  if (cfg.monitor.port > 0) {
    auto token = monitor::resolve_control_token(cfg.monitor);
    if (!token.is_ok()) return token.status();
    monitor::HttpServerOptions opt;
    opt.host = cfg.monitor.host;
    opt.port = static_cast<int>(cfg.monitor.port) + local_rank(rank);
    opt.token = token.value();
    opt.const_labels = {{"job", cfg.monitor.job}, {"rank", std::to_string(rank)}};
    auto server = monitor::HttpServer::start(opt, m->registry_, m->control());
    if (!server.is_ok()) return server.status();
    m->server_ = std::move(server.value());
  }
  if (rank == 0 && std::any_of(cfg.alerts.begin(), cfg.alerts.end(),
                               [](const monitor::AlertRule& r) { return r.has_action("notify"); })) {
    monitor::NotificationQueueOptions q;
    q.cooldown_s = cfg.monitor.notify_cooldown;
    q.timeout_s = cfg.monitor.notify_timeout;
    q.connect_timeout_s = std::min(5.0, cfg.monitor.notify_timeout);
    q.shutdown_s = cfg.monitor.notify_timeout;
    m->notifications_ = std::make_unique<monitor::NotificationQueue>(q);
  }
  if (rank == 0 && cfg.monitor.tensorboard) {
    auto tb = monitor::TensorBoardWriter::create(cfg.train.out_dir);
    if (!tb.is_ok()) return tb.status();
    m->tensorboard_.emplace(std::move(tb.value()));
  }
  if (rank == 0)
    for (size_t i = 0; i < cfg.alerts.size(); ++i) {
      const monitor::AlertRule& rule = cfg.alerts[i];
      if (monitor::StepCondition::is_step_condition(rule.condition))
        m->step_rules_.emplace_back(i, monitor::StepCondition(rule));
      else if (rule.condition == "plateau")
        m->plateau_rules_.emplace_back(i, monitor::PlateauState(rule));
    }
  for (size_t i = 0; i < cfg.alerts.size(); ++i)
    if (cfg.alerts[i].condition == "hang") {
      RunMonitor* self = m.get();
      m->watchdogs_.push_back(std::make_unique<monitor::Watchdog>(
          cfg.alerts[i].timeout, [self, i](double seconds) { self->on_hang(self->cfg_.alerts[i], seconds); }));
    }
  // Note [Hang dumps from every rank]: stale ones from an earlier run in this out_dir go.
  std::remove(hang_dump_path(cfg.train.out_dir, rank).c_str());
  if (rank == 0) std::remove(hang_summary_path(cfg.train.out_dir).c_str());
  // A collective's timeout writes this rank's flight record here (comm/flight_recorder.h).
  comm::flight_recorder().set_dump_dir(cfg.train.out_dir, rank);
  // On a GPU, NVML's utilisation, memory and power join the machine figures (one line and
  // none of them where NVML cannot be loaded).
  if (device.is_cuda()) m->gpu_ = monitor::GpuMetrics::open(device.index, "rank " + std::to_string(rank));
  m->register_step_series();
  m->publish_memory(m->memory());
  m->publish_system(/*force=*/true);
  m->set_state("running");
  return m;
}

void RunMonitor::register_step_series() {
  monitor::Registry& r = registry_;
  StepSeries& s = series_;
  s.step = &r.gauge("trident_step", "optimizer steps completed");
  s.loss = &r.gauge("trident_loss", "training loss of the last step (mean over micro-batches and ranks)");
  s.lr = &r.gauge("trident_learning_rate", "learning rate of the last step");
  s.grad_norm = &r.gauge("trident_grad_norm", "global gradient norm before clipping");
  s.tokens_per_s = &r.gauge("trident_tokens_per_second", "training tokens per second over the last step (all ranks)");
  const char* help = "seconds of the last step spent in each phase";
  s.data_s = &r.gauge("trident_step_phase_seconds", help, {{"phase", "data"}});
  s.forward_backward_s = &r.gauge("trident_step_phase_seconds", help, {{"phase", "forward_backward"}});
  s.comm_wait_s = &r.gauge("trident_step_phase_seconds", help, {{"phase", "comm_wait"}});
  s.optimizer_s = &r.gauge("trident_step_phase_seconds", help, {{"phase", "optimizer"}});
  s.step_seconds = &r.histogram("trident_step_seconds", "wall time of a training step",
                                monitor::exponential_buckets(1e-3, 2, 20));
  const std::string dev = device_.str();
  for (int c = 0; c < kNumMemoryCategories; ++c)
    s.memory_bytes[c] = &r.gauge("trident_memory_bytes", "bytes in use per allocator category",
                                 {{"device", dev}, {"category", memory_category_name(static_cast<MemoryCategory>(c))}});
  s.memory_peak = &r.gauge("trident_memory_peak_bytes", "peak bytes in use since start", {{"device", dev}});
  s.memory_reserved = &r.gauge("trident_memory_reserved_bytes",
                               "bytes the allocator holds from the system (live and cached)", {{"device", dev}});
}

void RunMonitor::on_step(const StepMetrics& m) {
  last_step_.store(m.step);
  for (auto& w : watchdogs_) w->step_done();
  StepSeries& s = series_;
  s.step->set(static_cast<double>(m.step));
  s.loss->set(m.loss);
  s.lr->set(m.lr);
  s.grad_norm->set(m.grad_norm);
  s.tokens_per_s->set(m.tokens_per_s);
  // Registered at their first value: a run without them shows no NaN series.
  if (m.mfu) {
    if (s.mfu == nullptr)
      s.mfu = &registry_.gauge("trident_mfu_ratio", "model FLOPs utilisation against the measured GEMM ceiling");
    s.mfu->set(*m.mfu);
  }
  if (m.loss_scale) {
    if (s.loss_scale == nullptr) {
      s.loss_scale = &registry_.gauge("trident_loss_scale", "fp16 dynamic loss scale of the last step");
      s.skipped_steps = &registry_.counter("trident_skipped_steps_total", "steps skipped for inf/NaN gradients (fp16)");
    }
    s.loss_scale->set(*m.loss_scale);
    s.skipped_steps->set_total(static_cast<double>(m.skipped_steps));
  }
  if (m.nvme) {
    if (s.nvme_read == nullptr) {
      const char* help =
          "bytes this rank moved between its NVMe tiers (optimizer state, ZeRO-3's parameters) and memory in the "
          "last step";
      s.nvme_read = &registry_.gauge("trident_nvme_bytes", help, {{"direction", "read"}});
      s.nvme_written = &registry_.gauge("trident_nvme_bytes", help, {{"direction", "write"}});
      s.nvme_wait = &registry_.gauge("trident_nvme_wait_seconds",
                                     "seconds of the last step this rank waited for its NVMe tiers");
    }
    s.nvme_read->set(static_cast<double>(m.nvme->read_bytes));
    s.nvme_written->set(static_cast<double>(m.nvme->written_bytes));
    s.nvme_wait->set(m.nvme->wait_s);
  }
  s.data_s->set(m.data_s);
  s.forward_backward_s->set(m.forward_backward_s);
  s.comm_wait_s->set(m.comm_wait_s);
  s.optimizer_s->set(m.optimizer_s);
  s.step_seconds->observe(m.step_s);
  for (const auto& [name, mean] : m.aux) {
    monitor::Gauge*& g = s.aux[name];
    if (g == nullptr)
      g = &registry_.gauge("trident_aux_value", "mean of an auxiliary loss or metric of the forward over the last step",
                           {{"name", name}});
    g->set(mean);
  }
  publish_moe(m.moe_layers);
  publish_memory(m.memory ? *m.memory : memory());
  publish_comm();
  publish_system(/*force=*/false);
  monitor::StepSample sample{m.step, m.loss, m.grad_norm, m.tokens_per_s, m.skipped};
  if (const auto load = m.aux.find("moe_max_load"); load != m.aux.end()) sample.max_expert_load = load->second;
  // Per layer where known: a collapse in one layer is not averaged away by the others.
  for (size_t i = 0; i < m.moe_layers.size(); ++i) {
    const MoeLayerMetrics& l = m.moe_layers[i];
    const int64_t total = std::accumulate(l.tokens.begin(), l.tokens.end(), int64_t{0});
    if (total <= 0) continue;
    const double share = static_cast<double>(*std::max_element(l.tokens.begin(), l.tokens.end())) / static_cast<double>(total);
    if (sample.max_expert_load_layer < 0 || share > sample.max_expert_load) {
      sample.max_expert_load = share;
      sample.max_expert_load_layer = l.layer;
    }
  }
  for (auto& [i, rule] : step_rules_)
    if (std::optional<monitor::AlertEvent> e = rule.observe(sample)) fire(cfg_.alerts[i], *e);
  recent_step_s_ = recent_step_s_ == 0.0 ? m.step_s : 0.9 * recent_step_s_ + 0.1 * m.step_s;
  status_.step = m.step;
  status_.loss = m.loss;
  update_status();
  if (tensorboard_) {
    std::vector<std::pair<std::string, double>> scalars = {
        {"train/loss", m.loss},
        {"train/lr", m.lr},
        {"train/grad_norm", m.grad_norm},
        {"train/tokens_per_s", m.tokens_per_s},
        {"time/step_s", m.step_s},
        {"time/data_s", m.data_s},
        {"time/forward_backward_s", m.forward_backward_s},
        {"time/comm_wait_s", m.comm_wait_s},
        {"time/optimizer_s", m.optimizer_s},
    };
    if (m.mfu) scalars.emplace_back("train/mfu", *m.mfu);
    if (m.loss_scale) scalars.emplace_back("train/loss_scale", *m.loss_scale);
    for (const auto& [name, mean] : m.aux) scalars.emplace_back("aux/" + name, mean);
    for (const MoeLayerMetrics& l : m.moe_layers) {
      const std::string at = "moe/layer_" + std::to_string(l.layer) + "/";
      for (size_t e = 0; e < l.tokens.size(); ++e)
        scalars.emplace_back(at + "expert_" + std::to_string(e) + "_tokens", static_cast<double>(l.tokens[e]));
      scalars.emplace_back(at + "dropped", static_cast<double>(l.dropped));
      if (l.aux_loss) scalars.emplace_back(at + "aux_loss", *l.aux_loss);
      if (l.z_loss) scalars.emplace_back(at + "z_loss", *l.z_loss);
      if (l.all_to_all_bytes) scalars.emplace_back(at + "all_to_all_bytes", static_cast<double>(*l.all_to_all_bytes));
      if (l.all_to_all_seconds) scalars.emplace_back(at + "all_to_all_s", *l.all_to_all_seconds);
    }
    tensorboard_->write_scalars(m.step, wall_time_now(), scalars);
  }
}

void RunMonitor::on_eval(int64_t step, double val_loss) {
  for (auto& w : watchdogs_) w->step_done();  // progress too
  registry_.gauge("trident_val_loss", "validation loss of the last evaluation").set(val_loss);
  registry_.gauge("trident_val_perplexity", "exp(validation loss) of the last evaluation").set(std::exp(val_loss));
  status_.val_loss = val_loss;
  update_status();
  if (tensorboard_)
    tensorboard_->write_scalars(step, wall_time_now(), {{"val/loss", val_loss}, {"val/perplexity", std::exp(val_loss)}});
  for (auto& [i, rule] : plateau_rules_)
    if (std::optional<monitor::AlertEvent> e = rule.observe(step, val_loss)) fire(cfg_.alerts[i], *e);
}

// Rank 0 alone evaluates the rules (every rank sees the same val loss) and notifies at once;
// checkpoint, pause and stop go through its RunControl, so every rank acts at the same
// step boundary (Note [Control at step boundaries] in trainer.cc).
void RunMonitor::fire(const monitor::AlertRule& rule, const monitor::AlertEvent& event) {
  record_and_notify(rule, event, /*log=*/rule.has_action("log"));
  uint32_t bits = 0;
  for (const std::string& action : rule.action_list()) {
    if (action == "checkpoint") {
      bits |= monitor::kControlCheckpoint;
    } else if (action == "pause") {
      // Note [Pause without a server]: nobody could resume it; stop with a checkpoint instead
      // (exit 79, a rule's stop: Note [Exit statuses]), rather than hold the machines idle.
      bits |= server_ ? monitor::kControlPause : monitor::kControlStop | monitor::kControlStopByRule;
    } else if (action == "stop") {
      bits |= monitor::kControlStop | monitor::kControlStopByRule;
    } else if (action == "rollback_and_skip") {
      bits |= monitor::kControlRollback;
      rollback_requests_.push_back(static_cast<size_t>(&rule - cfg_.alerts.data()));
    }
  }
  if (bits != 0) control_.request(bits, event.message());
}

// Only rank 0 writes alerts.jsonl and notifies (a hang's event on other ranks is logged and
// dumped only: one e-mail per hang, not one per rank).
void RunMonitor::record_and_notify(const monitor::AlertRule& rule, const monitor::AlertEvent& event, bool log) {
  registry_.counter("trident_alerts_total", "alerts fired", {{"rule", rule.name}}).inc();
  if (log) std::fprintf(stderr, "%s\n", event.message().c_str());
  if (rank_ != 0) return;
  // Notified events name the run and count the firings the cooldown held back; the same JSON
  // goes to alerts.jsonl, the webhook and the command. Nothing here waits on an endpoint:
  // Note [Notifications off the training thread] in monitor/notification_queue.h.
  std::string line = event.json();
  std::optional<monitor::Notification> note;
  if (rule.has_action("notify") && notifications_) {
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) j = {{"event", line}};
    const nlohmann::ordered_json run = monitor::run_identity(cfg_.train.out_dir, cfg_.monitor.job, rank_, event.step);
    j["run"] = run;
    int64_t suppressed = 0;
    if (notifications_->admit(rule.name, &suppressed)) {
      j["suppressed"] = suppressed;
      note.emplace();
      note->rule = rule.name;
      note->json = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      note->webhook = rule.webhook;
      note->smtp_url = rule.smtp_url;
      note->email_from = rule.email_from;
      note->email_to = rule.email_to;
      note->command = rule.command;
      note->subject = "[trident] " + cfg_.monitor.job + " on " + run["host"].get<std::string>() + ": " + event.message();
      note->text = event.message() + "\n\nrun: out_dir " + run["out_dir"].get<std::string>() + ", job " +
                   cfg_.monitor.job + ", host " + run["host"].get<std::string>() + ", rank " + std::to_string(rank_) +
                   ", step " + std::to_string(event.step) + ", " + run["time"].get<std::string>() + "\n";
      if (suppressed > 0)
        note->text += std::to_string(suppressed) + " earlier firing(s) of this rule were not sent (monitor.notify_cooldown = " +
                      std::to_string(static_cast<int64_t>(cfg_.monitor.notify_cooldown)) + " s)\n";
      note->text += "\n" + j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
      line = note->json;
    } else {
      j["notified"] = false;  // within the rule's cooldown: counted, sent with its next notification
      line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
  }
  if (std::FILE* f = std::fopen((cfg_.train.out_dir + "/alerts.jsonl").c_str(), "a")) {
    std::fprintf(f, "%s\n", line.c_str());
    std::fclose(f);
  }
  if (rule.has_action("notify") && rule.webhook.empty() && rule.email_to.empty() && rule.command.empty())
    std::fprintf(stderr,
                 "alert '%s': notify has nowhere to go (set webhook, email_to or command in its [[alerts]] table)\n",
                 rule.name.c_str());
  if (note) notifications_->post(*note);  // never waits; a full queue drops it with a line
}

// Note [Hang actions]
// A hung rank cannot reach the step boundary where rank 0's decisions travel, so the hang
// rule is the one rule every rank evaluates for itself, on its watchdog's thread: `log`
// prints a line naming the rank and its last finished step; every rank writes
// out_dir/hang_rank<r>.json (the step, the seconds since, and its communication calls and
// bytes per axis and op as of that step, and the flight record: the last communication
// operations with their sequence numbers, Note [Reading a flight record] in
// comm/flight_recorder.h); rank 0 reads every rank's dump, names the rank that is behind and
// the collective the others wait in (comm/flight_diagnosis.h), writes that to
// out_dir/hang_summary.json, prints it, appends the event to alerts.jsonl and notifies; `stop`
// ends the process with kExitHung (76) without a checkpoint (the state mid-step is not one),
// and `trident launch` then ends the other ranks. A run resumes from its last checkpoint.
//
// Note [Hang dumps from every rank]
// The first rank to exit ends the job (mpirun kills the rest), and the ranks' watchdogs fire
// up to a step apart (more on a loaded machine), so exiting at once would lose the dumps of
// the ranks whose watchdogs had not fired yet: the one rank that tells the others apart can
// be among them. So with `stop`, rank 0 exits once every rank's dump is in and the summary is
// written, and every other rank once the summary exists; each waits at most the grace
// (max(timeout, 10 s)), so the job ends within timeout + grace of the last step even when a
// rank cannot write (another host without a shared out_dir: the summary then says which
// ranks' dumps are missing). Each file is written to a temporary name and renamed, so a
// reader never sees half of one; a run removes its own stale ones when it starts.

void RunMonitor::on_hang(const monitor::AlertRule& rule, double seconds) {
  monitor::AlertEvent e;
  e.rule = rule.name;
  e.condition = "hang";
  e.metric = "seconds_since_step";
  e.step = last_step_.load();
  e.value = seconds;
  char detail[256];
  std::snprintf(detail, sizeof detail, "rank %d finished no step for %.1f s (timeout %g s) after step %lld", rank_,
                seconds, rule.timeout, static_cast<long long>(e.step));
  e.detail = detail;
  nlohmann::ordered_json dump = {{"rank", rank_}, {"step", e.step}, {"seconds_since_step", seconds},
                                 {"timeout", rule.timeout}, {"comm_as_of_step", nlohmann::json::array()}};
  for (const monitor::Registry::Family& f : registry_.snapshot())
    if (f.name == "trident_comm_calls_total" || f.name == "trident_comm_bytes_total")
      for (const monitor::Registry::Series& series : f.series) {
        nlohmann::ordered_json row = {{"metric", f.name}, {"value", series.value}};
        for (const auto& [k, v] : series.labels) row[k] = v;
        dump["comm_as_of_step"].push_back(row);
      }
  dump["flight_record"] = nlohmann::json::parse(comm::flight_recorder().json());
  const std::string& out_dir = cfg_.train.out_dir;
  const std::string path = hang_dump_path(out_dir, rank_);
  const bool log = rule.has_action("log"), stop = rule.has_action("stop");
  auto say_last_words = [&] {
    if (log)
      std::fprintf(stderr, "rank %d: last communication (flight record, Note [Reading a flight record]):\n%s", rank_,
                   comm::flight_recorder().text(8).c_str());
    if (stop)
      std::fprintf(stderr, "rank %d: hang (%s): state in %s; exiting with status %d\n", rank_, rule.name.c_str(),
                   path.c_str(), kExitHung);
    std::fflush(stderr);
  };
  const int world = mesh_ != nullptr ? mesh_->world().size() : 1;
  if (rank_ == 0 && world > 1) {  // Note [Hang dumps from every rank]
    write_or_say(path, dump.dump(2), rank_);
    const nlohmann::ordered_json summary =
        hang_summary(out_dir, world, hang_grace_s(rule), e.step);
    e.detail += "; " + summary["text"].get<std::string>();
    record_and_notify(rule, e, log);
    write_or_say(hang_summary_path(out_dir), summary.dump(2), rank_);
    std::fprintf(stderr, "hang: %s (%s)\n", summary["text"].get<std::string>().c_str(),
                 hang_summary_path(out_dir).c_str());
    say_last_words();
  } else {
    // Its lines first, then the dump: once rank 0 has every dump (and may end the job),
    // every rank has had its say.
    record_and_notify(rule, e, log);
    say_last_words();
    write_or_say(path, dump.dump(2), rank_);
    if (stop && world > 1) {  // the summary is rank 0's last word
      const auto deadline = Clock::now() + std::chrono::duration<double>(hang_grace_s(rule) + 5.0);
      while (!checkpoint::exists(checkpoint::default_env(), hang_summary_path(out_dir)) && Clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  if (stop && notifications_) notifications_->close();  // bounded: monitor.notify_timeout
  if (stop) std::_Exit(kExitHung);
}

void RunMonitor::on_ranks(int64_t step, const monitor::StepCondition::RankSample& ranks) {
  for (auto& [i, rule] : step_rules_)
    if (std::optional<monitor::AlertEvent> e = rule.observe_ranks(step, ranks)) fire(cfg_.alerts[i], *e);
}

std::optional<int64_t> RunMonitor::rollback_target(int64_t bad, const std::vector<int64_t>& candidates,
                                                   std::string* why) const {
  std::optional<int64_t> target = candidates.empty() ? std::nullopt : std::optional<int64_t>(candidates.back());
  for (const auto& [i, rule] : step_rules_) {
    if (std::find(rollback_requests_.begin(), rollback_requests_.end(), i) == rollback_requests_.end()) continue;
    const std::optional<int64_t> t = rule.rollback_target(bad, candidates);
    if (!t) {
      const monitor::AlertRule& r = cfg_.alerts[i];
      *why = "alert '" + r.name + "' (" + r.condition + ") after step " + std::to_string(bad) +
             ": every checkpoint before it has been rolled back to rollback_limit = " +
             std::to_string(r.rollback_limit) + " times within rollback_window = " + std::to_string(r.rollback_window) +
             " steps (" + rule.rollbacks_text(bad) + "), and the run goes bad again each time: it has diverged; "
             "stopping without a checkpoint (the newest good one stays in train.out_dir). Lower optim.lr, or look "
             "at the data after the last checkpoint";
      return std::nullopt;
    }
    target = std::min(*target, *t);
  }
  return target;
}

void RunMonitor::on_rollback(int64_t bad, int64_t to) {
  for (auto& [i, rule] : step_rules_) {
    rule.rollback_to(to);
    if (std::find(rollback_requests_.begin(), rollback_requests_.end(), i) != rollback_requests_.end())
      rule.record_rollback(bad, to);
  }
  rollback_requests_.clear();
  registry_.counter("trident_rollbacks_total", "rollbacks to an earlier checkpoint (rollback_and_skip)").inc();
}

// Note [Alert state in checkpoints]
// A rule's state decides when it fires next: the plateau rule's best value and its count of
// evaluations without improvement, a spike rule's window, the rollback counts of Note
// [Rollback limits]. A run that stops and is resumed (a requeue, a preemption) must go on with
// that state, not start afresh: a plateau rule whose count restarts fires again `patience`
// evaluations after every restart, a rollback limit that restarts never stops a loop that
// spans restarts. So rank 0's state goes into every checkpoint (trainer_state.json's
// "alerts", one entry per rule with its name and condition) and a resumed run restores the
// entries whose name and condition match a rule of its config, in order; a rule new to the
// config starts afresh. A rollback does not restore it from the checkpoint it loads (that
// state predates the rollback): the live state forgets the discarded steps instead (Note
// [Spike counting]). Throughput medians, stragglers and memory are the machines' and start
// afresh.
nlohmann::json RunMonitor::alert_state() const {
  if (rank_ != 0) return nullptr;
  std::vector<nlohmann::json> by_rule(cfg_.alerts.size());
  for (const auto& [i, rule] : plateau_rules_) by_rule[i] = rule.state();
  for (const auto& [i, rule] : step_rules_) by_rule[i] = rule.state();
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < by_rule.size(); ++i)
    if (!by_rule[i].is_null())
      out.push_back({{"name", cfg_.alerts[i].name}, {"condition", cfg_.alerts[i].condition}, {"state", by_rule[i]}});
  return out;
}

void RunMonitor::restore_alert_state(const nlohmann::json& state) {
  if (rank_ != 0 || !state.is_array()) return;
  std::vector<bool> used(state.size(), false);
  auto saved = [&](size_t i) -> const nlohmann::json* {
    for (size_t k = 0; k < state.size(); ++k)
      if (!used[k] && state[k].is_object() && state[k].value("name", "") == cfg_.alerts[i].name &&
          state[k].value("condition", "") == cfg_.alerts[i].condition && state[k].contains("state")) {
        used[k] = true;
        return &state[k].at("state");
      }
    return nullptr;
  };
  for (auto& [i, rule] : plateau_rules_)
    if (const nlohmann::json* s = saved(i)) rule.restore(*s);
  for (auto& [i, rule] : step_rules_)
    if (const nlohmann::json* s = saved(i)) rule.restore(*s);
}

void RunMonitor::on_checkpoint(double seconds, int64_t bytes) {
  for (auto& w : watchdogs_) w->step_done();  // progress too
  registry_.gauge("trident_checkpoint_write_seconds", "seconds the last checkpoint took to write").set(seconds);
  registry_.gauge("trident_checkpoint_bytes", "bytes of the last checkpoint (rank 0's view of its directory)")
      .set(static_cast<double>(bytes));
  registry_.counter("trident_checkpoints_total", "checkpoints written by this run").inc();
}

void RunMonitor::set_state(const std::string& state, const std::string& reason) {
  for (auto& w : watchdogs_) w->set_armed(state == "running");  // a pause is no hang
  status_.state = state;
  status_.reason = reason;
  registry_.gauge("trident_paused", "1 while the run is paused at a step boundary").set(state == "paused" ? 1 : 0);
  update_status();
}

void RunMonitor::update_status() {
  if (recent_step_s_ > 0) status_.eta_s = recent_step_s_ * static_cast<double>(status_.steps - status_.step);
  if (rank_ == 0) control_.set_status(status_);
}

StepMetrics::Memory RunMonitor::memory() const {
  StepMetrics::Memory m;
  m.rss = rss_bytes_;
  Allocator* a = device_allocator(device_.type);
  if (a == nullptr) return m;
  const MemoryStats s = a->stats();
  for (int c = 0; c < kNumMemoryCategories; ++c) {
    m.bytes[c] = s.by_category[c].current;
    m.peak_bytes[c] = s.by_category[c].peak;
  }
  m.peak = s.in_use.peak;
  m.reserved = s.reserved;
  m.limit = s.limit;
  return m;
}

double RunMonitor::device_memory_ratio() const {
  Allocator* a = device_.type == DeviceType::kCPU ? nullptr : device_allocator(device_.type);
  if (a == nullptr) return std::nan("");
  const MemoryStats s = a->stats();
  return s.limit > 0 ? static_cast<double>(s.reserved) / static_cast<double>(s.limit) : std::nan("");
}

void RunMonitor::publish_memory(const StepMetrics::Memory& m) {
  for (int c = 0; c < kNumMemoryCategories; ++c) series_.memory_bytes[c]->set(static_cast<double>(m.bytes[c]));
  series_.memory_peak->set(static_cast<double>(m.peak));
  series_.memory_reserved->set(static_cast<double>(m.reserved));
  if (m.limit > 0)
    registry_.gauge("trident_memory_limit_bytes", "the device's memory, or its cap, that memory_high compares with",
                    {{"device", device_.str()}})
        .set(static_cast<double>(m.limit));
}

void RunMonitor::publish_moe(const std::vector<MoeLayerMetrics>& layers) {
  StepSeries& s = series_;
  for (const MoeLayerMetrics& l : layers) {
    const std::string layer = std::to_string(l.layer);
    for (size_t e = 0; e < l.tokens.size(); ++e) {
      monitor::Gauge*& g = s.moe_expert_tokens[{l.layer, static_cast<int64_t>(e)}];
      if (g == nullptr)
        g = &registry_.gauge("trident_moe_expert_tokens",
                             "routing choices per expert of a mixture-of-experts layer over the last step (all ranks)",
                             {{"layer", layer}, {"expert", std::to_string(e)}});
      g->set(static_cast<double>(l.tokens[e]));
    }
    // The layer's other gauges, each registered at its first value.
    std::array<monitor::Gauge*, 5>& g = s.moe_layer[l.layer];
    auto set = [&](size_t i, const char* name, const char* help, double v) {
      if (g[i] == nullptr) g[i] = &registry_.gauge(name, help, {{"layer", layer}});
      g[i]->set(v);
    };
    set(0, "trident_moe_dropped_tokens",
        "routing choices a mixture-of-experts layer's capacity dropped in the last step (all ranks)",
        static_cast<double>(l.dropped));
    if (l.aux_loss)
      set(1, "trident_moe_aux_loss", "a mixture-of-experts layer's load-balancing loss, mean over the last step",
          *l.aux_loss);
    if (l.z_loss)
      set(2, "trident_moe_z_loss", "a mixture-of-experts layer's router z-loss, mean over the last step", *l.z_loss);
    if (l.all_to_all_bytes)
      set(3, "trident_moe_all_to_all_bytes",
          "bytes a mixture-of-experts layer's expert-parallel exchanges sent between ranks in the last step (all ranks)",
          static_cast<double>(*l.all_to_all_bytes));
    if (l.all_to_all_seconds)
      set(4, "trident_moe_all_to_all_seconds",
          "seconds a rank spent in a mixture-of-experts layer's expert-parallel exchanges in the last step (mean over "
          "ranks)",
          *l.all_to_all_seconds);
  }
}

void RunMonitor::publish_comm() {
  if (mesh_ == nullptr) return;
  std::vector<std::pair<const char*, const comm::Communicator*>> axes = {{"world", &mesh_->world()}};
  if (&mesh_->dp() != &mesh_->world()) axes.emplace_back("dp", &mesh_->dp());
  if (mesh_->tp_size() > 1) axes.emplace_back("tp", &mesh_->tp());
  if (mesh_->pp_size() > 1) axes.emplace_back("pp", &mesh_->pp());
  for (size_t a = 0; a < axes.size(); ++a) {
    const auto& [axis, c] = axes[a];
    const comm::CommStats& st = c->stats();
    for (int op = 0; op < comm::kNumCommOps; ++op) {
      const comm::CommStats::Counter& k = st.ops[op];
      if (k.calls == 0) continue;
      monitor::Counter*& calls = series_.comm_calls[a][op];
      monitor::Counter*& bytes = series_.comm_bytes[a][op];
      if (calls == nullptr) {  // first use of this op on this axis
        const monitor::Labels labels = {{"axis", axis}, {"op", comm::comm_op_name(static_cast<comm::CommOp>(op))}};
        calls = &registry_.counter("trident_comm_calls_total", "collective and point-to-point calls", labels);
        bytes = &registry_.counter("trident_comm_bytes_total", "bytes this rank handed to communication calls", labels);
      }
      calls->set_total(static_cast<double>(k.calls));
      bytes->set_total(static_cast<double>(k.bytes));
    }
    const int64_t link[2] = {st.intra_host_bytes, st.inter_host_bytes};
    for (int l = 0; l < 2; ++l) {
      if (link[l] == 0) continue;
      monitor::Counter*& c = series_.comm_link_bytes[a][static_cast<size_t>(l)];
      if (c == nullptr)
        c = &registry_.counter("trident_comm_link_bytes_total", "bytes this rank sent, by where the receiver is",
                               {{"axis", axis}, {"link", l == 0 ? "intra_host" : "inter_host"}});
      c->set_total(static_cast<double>(link[l]));
    }
  }
}

void RunMonitor::publish_system(bool force) {
  const auto now = Clock::now();
  if (!force && std::chrono::duration<double>(now - last_system_sample_).count() < cfg_.monitor.system_interval) return;
  last_system_sample_ = now;
  const monitor::ProcessStats s = monitor::read_process_stats();
  rss_bytes_ = s.rss_bytes;
  if (s.rss_bytes)
    registry_.gauge("trident_process_resident_memory_bytes", "resident memory of this rank's process")
        .set(static_cast<double>(*s.rss_bytes));
  if (s.cpu_seconds) {
    registry_.counter("trident_process_cpu_seconds_total", "user and system CPU time of this rank's process")
        .set_total(*s.cpu_seconds);
    if (last_cpu_seconds_) {
      const double wall = std::chrono::duration<double>(now - last_cpu_time_).count();
      if (wall > 0)
        registry_.gauge("trident_process_cpu_utilization_ratio", "CPU seconds per wall second since the last sample "
                                                                 "(cores busy)")
            .set((*s.cpu_seconds - *last_cpu_seconds_) / wall);
    }
    last_cpu_seconds_ = s.cpu_seconds;
    last_cpu_time_ = now;
  }
  if (s.host_memory_total_bytes)
    registry_.gauge("trident_host_memory_total_bytes", "the host's memory").set(static_cast<double>(*s.host_memory_total_bytes));
  if (s.host_memory_total_bytes && s.host_memory_available_bytes && *s.host_memory_total_bytes > 0)
    host_memory_ratio_ = 1.0 - static_cast<double>(*s.host_memory_available_bytes) /
                                   static_cast<double>(*s.host_memory_total_bytes);
  if (s.host_memory_available_bytes)
    registry_.gauge("trident_host_memory_available_bytes", "the host's available memory")
        .set(static_cast<double>(*s.host_memory_available_bytes));
  if (gpu_) gpu_->publish(registry_);
  for (const monitor::ProcessStats::Interface& i : s.network) {
    registry_.counter("trident_network_receive_bytes_total", "bytes received per interface (/proc/net/dev)",
                      {{"device", i.name}})
        .set_total(static_cast<double>(i.receive_bytes));
    registry_.counter("trident_network_transmit_bytes_total", "bytes sent per interface (/proc/net/dev)",
                      {{"device", i.name}})
        .set_total(static_cast<double>(i.transmit_bytes));
  }
}

}  // namespace trident::train
