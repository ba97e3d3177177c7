#include "train/run_monitor.h"

#include <cmath>
#include <cstdlib>

#include "core/allocator.h"
#include "monitor/monitor_options.h"
#include "monitor/notify.h"

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
  if (rank == 0 && cfg.monitor.tensorboard) {
    auto tb = monitor::TensorBoardWriter::create(cfg.train.out_dir);
    if (!tb.is_ok()) return tb.status();
    m->tensorboard_.emplace(std::move(tb.value()));
  }
  if (rank == 0)
    for (const monitor::AlertRule& rule : cfg.alerts) m->plateaus_.emplace_back(rule);
  m->publish_memory();
  m->publish_system(/*force=*/true);
  m->set_state("running");
  return m;
}

void RunMonitor::on_step(const StepMetrics& m) {
  monitor::Registry& r = registry_;
  // Registering is a lookup under a lock; per step this is a few dozen of them, microseconds
  // against a step of milliseconds (measured in the report of issue #23).
  r.gauge("trident_step", "optimizer steps completed").set(static_cast<double>(m.step));
  r.gauge("trident_loss", "training loss of the last step (mean over micro-batches and ranks)").set(m.loss);
  r.gauge("trident_learning_rate", "learning rate of the last step").set(m.lr);
  r.gauge("trident_grad_norm", "global gradient norm before clipping").set(m.grad_norm);
  r.gauge("trident_tokens_per_second", "training tokens per second over the last step (all ranks)").set(m.tokens_per_s);
  if (m.mfu) r.gauge("trident_mfu_ratio", "model FLOPs utilisation against the measured GEMM ceiling").set(*m.mfu);
  if (m.loss_scale) {
    r.gauge("trident_loss_scale", "fp16 dynamic loss scale of the last step").set(*m.loss_scale);
    r.counter("trident_skipped_steps_total", "steps skipped for inf/NaN gradients (fp16)")
        .set_total(static_cast<double>(m.skipped_steps));
  }
  const char* help = "seconds of the last step spent in each phase";
  r.gauge("trident_step_phase_seconds", help, {{"phase", "data"}}).set(m.data_s);
  r.gauge("trident_step_phase_seconds", help, {{"phase", "forward_backward"}}).set(m.forward_backward_s);
  r.gauge("trident_step_phase_seconds", help, {{"phase", "comm_wait"}}).set(m.comm_wait_s);
  r.gauge("trident_step_phase_seconds", help, {{"phase", "optimizer"}}).set(m.optimizer_s);
  static const std::vector<double> kStepBuckets = monitor::exponential_buckets(1e-3, 2, 20);
  r.histogram("trident_step_seconds", "wall time of a training step", kStepBuckets).observe(m.step_s);
  publish_memory();
  publish_comm();
  publish_system(/*force=*/false);
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
    tensorboard_->write_scalars(m.step, wall_time_now(), scalars);
  }
}

void RunMonitor::on_eval(int64_t step, double val_loss) {
  registry_.gauge("trident_val_loss", "validation loss of the last evaluation").set(val_loss);
  registry_.gauge("trident_val_perplexity", "exp(validation loss) of the last evaluation").set(std::exp(val_loss));
  status_.val_loss = val_loss;
  update_status();
  if (tensorboard_)
    tensorboard_->write_scalars(step, wall_time_now(), {{"val/loss", val_loss}, {"val/perplexity", std::exp(val_loss)}});
  for (size_t i = 0; i < plateaus_.size(); ++i)
    if (std::optional<monitor::AlertEvent> e = plateaus_[i].observe(step, val_loss)) fire(cfg_.alerts[i], *e);
}

// Rank 0 alone evaluates the rules (every rank sees the same val loss) and notifies at once;
// checkpoint, pause and stop go through its RunControl, so every rank acts at the same
// step boundary (Note [Control at step boundaries] in trainer.cc).
void RunMonitor::fire(const monitor::AlertRule& rule, const monitor::AlertEvent& event) {
  registry_.counter("trident_alerts_total", "alerts fired", {{"rule", rule.name}}).inc();
  if (std::FILE* f = std::fopen((cfg_.train.out_dir + "/alerts.jsonl").c_str(), "a")) {
    std::fprintf(f, "%s\n", event.json().c_str());
    std::fclose(f);
  }
  uint32_t bits = 0;
  for (const std::string& action : rule.action_list()) {
    if (action == "log") {
      std::fprintf(stderr, "%s\n", event.message().c_str());
    } else if (action == "notify") {
      if (rule.webhook.empty() && rule.email_to.empty())
        std::fprintf(stderr, "alert '%s': notify has nowhere to go (set webhook or email_to in its [[alerts]] table)\n",
                     rule.name.c_str());
      if (!rule.webhook.empty())
        if (Status s = monitor::post_webhook(rule.webhook, event.json()); !s.is_ok())
          std::fprintf(stderr, "alert '%s': %s\n", rule.name.c_str(), s.to_string().c_str());
      if (!rule.email_to.empty())
        if (Status s = monitor::send_email(rule.smtp_url, rule.email_from, rule.email_to,
                                           "[trident] " + event.message(), event.json());
            !s.is_ok())
          std::fprintf(stderr, "alert '%s': %s\n", rule.name.c_str(), s.to_string().c_str());
    } else if (action == "checkpoint") {
      bits |= monitor::kControlCheckpoint;
    } else if (action == "pause") {
      // Note [Pause without a server]: nobody could resume it; stop with a checkpoint instead
      // (exit 75: the same command resumes), rather than hold the machines idle.
      bits |= server_ ? monitor::kControlPause : monitor::kControlStop;
    } else if (action == "stop") {
      bits |= monitor::kControlStop;
    }
  }
  if (bits != 0) control_.request(bits, event.message());
}

void RunMonitor::on_checkpoint(double seconds, int64_t bytes) {
  registry_.gauge("trident_checkpoint_write_seconds", "seconds the last checkpoint took to write").set(seconds);
  registry_.gauge("trident_checkpoint_bytes", "bytes of the last checkpoint (rank 0's view of its directory)")
      .set(static_cast<double>(bytes));
  registry_.counter("trident_checkpoints_total", "checkpoints written by this run").inc();
}

void RunMonitor::set_state(const std::string& state, const std::string& reason) {
  status_.state = state;
  status_.reason = reason;
  registry_.gauge("trident_paused", "1 while the run is paused at a step boundary").set(state == "paused" ? 1 : 0);
  update_status();
}

void RunMonitor::update_status() {
  if (recent_step_s_ > 0) status_.eta_s = recent_step_s_ * static_cast<double>(status_.steps - status_.step);
  if (rank_ == 0) control_.set_status(status_);
}

void RunMonitor::publish_memory() {
  Allocator* a = device_allocator(device_.type);
  if (a == nullptr) return;
  const MemoryStats s = a->stats();
  const std::string dev = device_.str();
  const char* help = "bytes in use per allocator category";
  for (int c = 0; c < kNumMemoryCategories; ++c)
    registry_
        .gauge("trident_memory_bytes", help,
               {{"device", dev}, {"category", memory_category_name(static_cast<MemoryCategory>(c))}})
        .set(static_cast<double>(s.by_category[c].current));
  registry_.gauge("trident_memory_peak_bytes", "peak bytes in use since start", {{"device", dev}})
      .set(static_cast<double>(s.in_use.peak));
  registry_.gauge("trident_memory_reserved_bytes", "bytes the allocator holds from the system (live and cached)",
                  {{"device", dev}})
      .set(static_cast<double>(s.reserved));
}

void RunMonitor::publish_comm() {
  if (mesh_ == nullptr) return;
  std::vector<std::pair<const char*, const comm::Communicator*>> axes = {{"world", &mesh_->world()}};
  if (&mesh_->dp() != &mesh_->world()) axes.emplace_back("dp", &mesh_->dp());
  if (mesh_->tp_size() > 1) axes.emplace_back("tp", &mesh_->tp());
  if (mesh_->pp_size() > 1) axes.emplace_back("pp", &mesh_->pp());
  for (const auto& [axis, c] : axes) {
    const comm::CommStats& st = c->stats();
    for (int op = 0; op < comm::kNumCommOps; ++op) {
      const comm::CommStats::Counter& k = st.ops[op];
      if (k.calls == 0) continue;
      const monitor::Labels labels = {{"axis", axis}, {"op", comm::comm_op_name(static_cast<comm::CommOp>(op))}};
      registry_.counter("trident_comm_calls_total", "collective and point-to-point calls", labels)
          .set_total(static_cast<double>(k.calls));
      registry_.counter("trident_comm_bytes_total", "bytes this rank handed to communication calls", labels)
          .set_total(static_cast<double>(k.bytes));
    }
  }
}

void RunMonitor::publish_system(bool force) {
  const auto now = Clock::now();
  if (!force && std::chrono::duration<double>(now - last_system_sample_).count() < cfg_.monitor.system_interval) return;
  last_system_sample_ = now;
  const monitor::ProcessStats s = monitor::read_process_stats();
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
  if (s.host_memory_available_bytes)
    registry_.gauge("trident_host_memory_available_bytes", "the host's available memory")
        .set(static_cast<double>(*s.host_memory_available_bytes));
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
