// A data-parallel (optionally ZeRO) training job that records, per step, its loss, the bytes
// this rank sent inside its host and to other hosts (the communicators' counters, Note [Link
// classes]) and its host's eth0 byte counters (the kernel's, as seen from the rank's network
// namespace): run by multihost_test.py across the namespace "hosts" of tests/support/netns.py.
// Each rank writes DIR/PREFIX_rank<r>.json, with what the metrics registry published last.
//
// Usage: multihost_probe DIR PREFIX STEPS ZERO_STAGE auto|on|off N_EMBD
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "comm/mpi_communicator.h"
#include "support/tiny_run.h"
#include "train/run_monitor.h"
#include "train/trainer.h"

using namespace trident;

namespace {

int64_t read_counter(const char* name) {
  std::ifstream f(std::string("/sys/class/net/eth0/statistics/") + name);
  int64_t v = -1;
  if (!(f >> v)) return -1;
  return v;
}

std::string json_list(const std::vector<double>& v) {
  std::string s = "[";
  char buf[64];
  for (size_t i = 0; i < v.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%s%.17g", i ? ", " : "", v[i]);
    s += buf;
  }
  return s + "]";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: multihost_probe DIR PREFIX STEPS ZERO_STAGE auto|on|off N_EMBD\n");
    return 2;
  }
  comm::MpiRuntime::init(&argc, &argv);
  std::shared_ptr<comm::Communicator> world = comm::MpiRuntime::world();
  const std::filesystem::path dir = argv[1];
  if (world->rank() == 0) {
    std::filesystem::create_directories(dir);
    if (!testing::write_tiny_run_data(dir).is_ok()) comm::MpiRuntime::abort(2);
  }
  world->barrier();
  train::TrainConfig cfg = testing::tiny_run_config(dir);
  cfg.train.steps = std::atoi(argv[3]);
  cfg.train.eval_interval = 1000000;
  cfg.parallel.zero_stage = std::atoi(argv[4]);
  cfg.parallel.hierarchical = argv[5];
  cfg.model.n_embd = std::atoi(argv[6]);
  cfg.train.threads = 1;
  cfg.train.out_dir = (dir / (std::string(argv[2]) + "_run")).string();
  auto t = train::Trainer::create(cfg, world);
  if (!t.is_ok()) {
    std::fprintf(stderr, "multihost_probe: %s\n", t.status().to_string().c_str());
    comm::MpiRuntime::abort(2);
  }
  t.value()->show_progress = false;
  std::vector<double> losses, intra, inter, tx, rx;
  t.value()->on_step = [&](const train::StepMetrics& m) {
    losses.push_back(m.loss);
    const auto [a, b] = t.value()->mesh()->link_bytes();
    // Every rank ends the step before a host's link counter is read: the other rank on
    // this host may still be sending the step's last chunks (the barrier's own bytes are a
    // few hundred against the step's ~600 KB).
    world->barrier();
    intra.push_back(static_cast<double>(a));
    inter.push_back(static_cast<double>(b));
    tx.push_back(static_cast<double>(read_counter("tx_bytes")));
    rx.push_back(static_cast<double>(read_counter("rx_bytes")));
  };
  const Status s = t.value()->run();
  if (!s.is_ok()) {
    std::fprintf(stderr, "multihost_probe: %s\n", s.to_string().c_str());
    comm::MpiRuntime::abort(2);
  }
  // What the metrics registry published (trident_comm_link_bytes_total, summed over axes).
  double published[2] = {0, 0};
  for (const monitor::Registry::Family& f : t.value()->monitor()->registry().snapshot())
    if (f.name == "trident_comm_link_bytes_total")
      for (const monitor::Registry::Series& series : f.series)
        for (const auto& [k, v] : series.labels)
          if (k == "link") published[v == "inter_host" ? 1 : 0] += series.value;
  const comm::HostLayout& hosts = world->hosts();
  const int r = world->rank();
  const std::string path = (dir / (std::string(argv[2]) + "_rank" + std::to_string(r) + ".json")).string();
  std::ofstream out(path + ".tmp");
  out << "{\"rank\": " << r << ", \"host\": \"" << hosts.names[static_cast<size_t>(hosts.host_of[static_cast<size_t>(r)])]
      << "\", \"hierarchical\": " << (t.value()->mesh()->dp().hierarchical() ? "true" : "false")
      << ", \"losses\": " << json_list(losses) << ", \"intra\": " << json_list(intra)
      << ", \"inter\": " << json_list(inter) << ", \"published\": " << json_list({published[0], published[1]}) << ", \"tx\": " << json_list(tx) << ", \"rx\": " << json_list(rx) << "}\n";
  out.close();
  std::filesystem::rename(path + ".tmp", path);
  return 0;
}
