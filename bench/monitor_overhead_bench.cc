// monitor_overhead_bench: what monitoring costs a training step (issue #23). Two trainers in
// one process, identical but for monitoring: "off" (monitor.port = 0, no TensorBoard file, no
// alert rules) and "on" (the HTTP endpoint on a loopback port, scraped every --scrape-ms by a
// thread of this process as Prometheus would, TensorBoard events every step, the plateau rule
// and every per-step rule). They train in alternating blocks of --block steps, so a machine
// whose load drifts (a shared one) drifts under both alike; each block is timed in process
// CPU seconds (getrusage: every thread, the server's and the scraper's included) and wall
// seconds. Prints per config and mode the CPU and wall seconds per step and the ratio on/off.
//
//   monitor_overhead_bench [--config tiny|124M|both] [--steps N] [--block K] [--scrape-ms MS]
//
// Steps run on random tokens (a synthetic token file in a temporary directory); the first
// block of each trainer is a warm-up and not counted.
#include <sys/resource.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "data/token_file.h"
#include "kernels/cpu/onednn_gemm.h"
#include "monitor/alert_rule.h"
#include "train/trainer.h"

using namespace trident;

namespace {

double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A free loopback port (bound, then released).
int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    close(fd);
    return 0;
  }
  close(fd);
  return ntohs(a.sin_port);
}

// GET /metrics on 127.0.0.1:port; the bytes of the answer (0 on failure).
size_t scrape(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  size_t got = 0;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    const char req[] = "GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    if (write(fd, req, sizeof req - 1) == static_cast<ssize_t>(sizeof req - 1)) {
      char buf[16384];
      ssize_t n;
      while ((n = read(fd, buf, sizeof buf)) > 0) got += static_cast<size_t>(n);
    }
  }
  close(fd);
  return got;
}

// /proc/cpuinfo's model name ("?" when unreadable).
std::string cpu_model() {
  std::FILE* f = std::fopen("/proc/cpuinfo", "r");
  if (f == nullptr) return "?";
  char line[512];
  std::string out = "?";
  while (std::fgets(line, sizeof line, f) != nullptr)
    if (std::strncmp(line, "model name", 10) == 0) {
      const char* colon = std::strchr(line, ':');
      if (colon != nullptr) out = std::string(colon + 2, std::strcspn(colon + 2, "\n"));
      break;
    }
  std::fclose(f);
  return out;
}

struct Mode {
  std::unique_ptr<train::Trainer> trainer;
  double cpu = 0, wall = 0;
  int64_t steps = 0;
};

train::TrainConfig config_for(const std::string& name, const std::string& dir, const std::string& data) {
  train::TrainConfig cfg;
  if (name == "tiny") {
    cfg.model.n_layer = 2;
    cfg.model.n_head = 2;
    cfg.model.n_embd = 64;
    cfg.model.block_size = 64;
    cfg.model.vocab_size = 256;
    cfg.data.batch_size = 4;
    cfg.data.seq_len = 64;
  } else {  // GPT-2 124M (the model.* defaults) at a batch of one short sequence
    cfg.data.batch_size = 1;
    cfg.data.seq_len = 128;
  }
  cfg.data.train_file = data;
  cfg.data.val_file = "";
  cfg.train.steps = 1000000;  // never reaches the end: no final checkpoint or evaluation
  cfg.train.eval_interval = 0;
  cfg.train.checkpoint_interval = 0;
  cfg.train.resume = false;
  cfg.train.threads = 1;
  cfg.train.out_dir = dir;
  return cfg;
}

}  // namespace

int main(int argc, char** argv) {
  std::string which = "both";
  int64_t steps = 0, block = 0, scrape_ms = 1000;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "monitor_overhead_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--config") which = next();
    else if (a == "--steps") steps = std::stoll(next());
    else if (a == "--block") block = std::stoll(next());
    else if (a == "--scrape-ms") scrape_ms = std::stoll(next());
    else {
      std::fprintf(stderr, "monitor_overhead_bench: unknown argument '%s' (--config tiny|124M|both, --steps N, "
                           "--block K, --scrape-ms MS)\n", a.c_str());
      return 2;
    }
  }
  if (which != "tiny" && which != "124M" && which != "both") {
    std::fprintf(stderr, "monitor_overhead_bench: --config '%s': allowed tiny, 124M, both\n", which.c_str());
    return 2;
  }
  const std::filesystem::path tmp = std::filesystem::temp_directory_path() /
                                    ("monitor_overhead_bench." + std::to_string(getpid()));
  std::filesystem::create_directories(tmp);
  std::printf("cpu: %s (%s), %u hardware threads\n", cpu_model().c_str(), kernels::cpu::onednn_cpu_isa().c_str(),
              std::thread::hardware_concurrency());
  std::printf("%-6s %-4s %8s %14s %14s\n", "config", "mode", "steps", "cpu_ms/step", "wall_ms/step");
  for (const std::string& name : {std::string("tiny"), std::string("124M")}) {
    if (which != "both" && which != name) continue;
    const bool tiny = name == "tiny";
    const int64_t n = steps > 0 ? steps : (tiny ? 600 : 12);
    const int64_t k = block > 0 ? block : (tiny ? 50 : 2);
    // Random tokens below the vocabulary.
    const int64_t vocab = tiny ? 256 : 50257;
    std::vector<uint16_t> tokens(1 << 20);
    std::mt19937 rng(1);
    for (uint16_t& t : tokens) t = static_cast<uint16_t>(rng() % vocab);
    const std::string data = (tmp / (name + ".bin")).string();
    if (Status s = data::write_token_file(data, tokens); !s.is_ok()) {
      std::fprintf(stderr, "%s\n", s.to_string().c_str());
      return 1;
    }
    Mode off, on;
    const int port = free_port();
    for (Mode* m : {&off, &on}) {
      const bool monitored = m == &on;
      train::TrainConfig cfg = config_for(name, (tmp / (name + (monitored ? "_on" : "_off"))).string(), data);
      cfg.alerts.clear();
      cfg.monitor.tensorboard = monitored;
      if (monitored) {
        cfg.monitor.port = port;
        monitor::AlertRule plateau;  // the default rule, and every per-step condition (log only)
        cfg.alerts.push_back(plateau);
        for (const char* c : {"not_finite", "loss_spike", "grad_norm_spike", "throughput_drop"}) {
          monitor::AlertRule r;
          r.name = c;
          r.condition = c;
          r.actions = "log";
          cfg.alerts.push_back(r);
        }
      }
      auto t = train::Trainer::create(cfg, nullptr);
      if (!t.is_ok()) {
        std::fprintf(stderr, "%s\n", t.status().to_string().c_str());
        return 1;
      }
      m->trainer = std::move(t.value());
      m->trainer->show_progress = false;
    }
    std::atomic<bool> done{false};
    std::atomic<int64_t> scrapes{0};
    std::thread scraper([&] {
      while (!done.load()) {
        if (scrape(port) > 0) scrapes.fetch_add(1);
        for (int64_t w = 0; w < scrape_ms && !done.load(); w += 10) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    });
    int64_t at = 0;
    bool warm = false;
    while (at < n + k) {  // the first block of each mode warms up
      const int64_t until = at + k;
      for (Mode* m : {&off, &on}) {
        const double c0 = cpu_seconds(), w0 = wall_seconds();
        if (Status s = m->trainer->run(until); !s.is_ok()) {
          std::fprintf(stderr, "%s\n", s.to_string().c_str());
          return 1;
        }
        if (warm) {
          m->cpu += cpu_seconds() - c0;
          m->wall += wall_seconds() - w0;
          m->steps += k;
        }
      }
      warm = true;
      at = until;
    }
    done = true;
    scraper.join();
    for (Mode* m : {&off, &on})
      std::printf("%-6s %-4s %8lld %14.3f %14.3f\n", name.c_str(), m == &on ? "on" : "off",
                  static_cast<long long>(m->steps), 1e3 * m->cpu / static_cast<double>(m->steps),
                  1e3 * m->wall / static_cast<double>(m->steps));
    std::printf("%-6s on/off: cpu %.4f, wall %.4f (%lld scrapes of /metrics)\n", name.c_str(),
                (on.cpu / static_cast<double>(on.steps)) / (off.cpu / static_cast<double>(off.steps)),
                (on.wall / static_cast<double>(on.steps)) / (off.wall / static_cast<double>(off.steps)),
                static_cast<long long>(scrapes.load()));
    std::fflush(stdout);
  }
  std::error_code ec;
  std::filesystem::remove_all(tmp, ec);
  return 0;
}
