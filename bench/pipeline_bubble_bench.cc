// pipeline_bubble_bench: the measured idle fraction of a pipeline schedule against theory.
// Run under mpirun with P ranks (one pipeline of P stages):
//
//   mpirun -np P --oversubscribe --bind-to none pipeline_bubble_bench [--micro M]
//          [--schedule 1f1b|gpipe|interleaved] [--virtual V] [--layers L] [--steps S]
//
// Trains a GPT-2 (width 256, T 128, 8 rows per micro-batch, vocabulary 512, L blocks split
// evenly, dropout off) on random tokens; after 2 warm-up steps, each rank's time waiting for
// another stage's activations or gradients over the timed steps is its idle time. Prints
// JSON: per-rank idle fractions, their mean, and the theoretical bubble of the schedule,
// (P - 1) / (V M + P - 1) (V = 1 except interleaved). Run each rank on its own core for a
// faithful number: with more ranks than cores, ranks that compute together also slow each
// other, which the theory does not model.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/mpi_communicator.h"
#include "core/factory.h"
#include "data/token_file.h"
#include "parallel/pipeline.h"
#include "train/trainer.h"

using namespace trident;

int main(int argc, char** argv) {
  int64_t micro = 8, virtual_stages = 1, layers = 8, steps = 5;
  std::string schedule = "1f1b";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--micro") micro = std::stoll(v);
    else if (a == "--schedule") schedule = v;
    else if (a == "--virtual") virtual_stages = std::stoll(v);
    else if (a == "--layers") layers = std::stoll(v);
    else if (a == "--steps") steps = std::stoll(v);
    else {
      std::fprintf(stderr, "unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  auto world = std::shared_ptr<comm::Communicator>(comm::MpiRuntime::world());
  const int P = world->size();
  Tensor pid = full({1}, static_cast<double>(::getpid()), DType::kI64);
  world->broadcast(pid, 0);
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("trident_bubble_" + std::to_string(static_cast<int64_t>(pid.item())));
  if (world->rank() == 0) {
    std::filesystem::create_directories(dir);
    std::mt19937 rng(1);
    std::vector<uint16_t> tokens(1 << 20);
    for (auto& t : tokens) t = static_cast<uint16_t>(rng() % 512);
    if (!data::write_token_file(dir / "train.bin", tokens).is_ok() || !data::write_token_file(dir / "val.bin", tokens).is_ok())
      return 1;
  }
  world->barrier();

  train::TrainConfig cfg;
  cfg.model.n_layer = layers;
  cfg.model.n_head = 4;
  cfg.model.n_embd = 256;
  cfg.model.block_size = 128;
  cfg.model.vocab_size = 512;
  cfg.data.train_file = (dir / "train.bin").string();
  cfg.data.val_file = (dir / "val.bin").string();
  cfg.data.batch_size = 8;
  cfg.data.seq_len = 128;
  cfg.data.grad_accum_steps = micro;
  cfg.data.sampler = "sequential";
  cfg.train.steps = steps + 2;
  cfg.train.eval_interval = 0;
  cfg.train.checkpoint_interval = 0;
  cfg.train.threads = 1;
  cfg.train.out_dir = (dir / "run").string();
  cfg.parallel.pp = P;
  cfg.parallel.virtual_stages = virtual_stages;
  cfg.parallel.pipeline_schedule = schedule;
  auto t = train::Trainer::create(cfg, world);
  if (!t.is_ok()) {
    std::fprintf(stderr, "%s\n", t.status().to_string().c_str());
    return 1;
  }
  t.value()->show_progress = false;
  double wait = 0.0, total = 0.0;
  t.value()->on_step = [&](const train::StepMetrics& m) {
    if (m.step <= 2) return;  // warm-up
    wait += t.value()->pipeline()->last_wait_seconds();
    total += t.value()->pipeline()->last_step_seconds();
  };
  // The final step's checkpoint is not what is measured; it is written after the last on_step.
  if (!t.value()->run().is_ok()) return 1;
  Tensor mine = full({1}, wait / total, DType::kF64);
  Tensor all = zeros({P}, DType::kF64);
  world->all_gather(mine, all);
  if (world->rank() == 0) {
    const std::vector<double> idle = to_vector<double>(all);
    double mean = 0.0;
    for (double f : idle) mean += f / P;
    const double theory = static_cast<double>(P - 1) / static_cast<double>(virtual_stages * micro + P - 1);
    nlohmann::json out = {{"stages", P},          {"micro_batches", micro},      {"schedule", schedule},
                          {"virtual_stages", virtual_stages}, {"layers", layers}, {"timed_steps", steps},
                          {"idle_fraction_per_rank", idle},   {"idle_fraction_mean", mean},
                          {"theory", theory},                 {"ratio_to_theory", mean / theory}};
    std::printf("%s\n", out.dump().c_str());
    std::filesystem::remove_all(dir);
  }
  return 0;
}
