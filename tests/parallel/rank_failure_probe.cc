// A data-parallel training job in which one rank fails mid-step: run by
// rank_failure_test.py under `mpirun -np 4`. During the third backward, from a grad-ready
// hook, while the other ranks are in the middle of the step's bucketed all-reduces, rank
// `victim` (argv[2]) either kills itself with SIGKILL (mode "kill") or stops taking part
// without exiting (mode "hang": it sleeps). The job must then end on every rank.
//
// Usage: rank_failure_probe DIR VICTIM kill|hang
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "autograd/engine.h"
#include "comm/mpi_communicator.h"
#include "data/token_file.h"
#include "support/phrase_corpus.h"
#include "support/tiny_run.h"
#include "train/trainer.h"

using namespace trident;

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: rank_failure_probe DIR VICTIM kill|hang\n");
    return 2;
  }
  const bool hang = std::string(argv[3]) == "hang";
  comm::MpiRuntime::init(&argc, &argv);
  std::shared_ptr<comm::Communicator> world = comm::MpiRuntime::world();
  const std::filesystem::path dir = argv[1];
  const int victim = std::atoi(argv[2]);
  if (world->rank() == 0) {
    std::filesystem::create_directories(dir);
    const std::vector<uint16_t> tokens = testing::phrase_corpus();
    if (!data::write_token_file(dir / "train.bin", tokens).is_ok() ||
        !data::write_token_file(dir / "val.bin", tokens).is_ok())
      comm::MpiRuntime::abort(2);
  }
  world->barrier();
  train::TrainConfig cfg = testing::tiny_run_config(dir);
  cfg.parallel.bucket_mb = 0.01;  // several buckets: the survivors are inside all-reduces
  cfg.train.steps = 50;
  cfg.train.eval_interval = 1000;
  cfg.train.out_dir = (dir / "run").string();
  // The hang rule (log only): every rank, the sleeping one too, dumps its flight record to
  // out_dir/hang_rank<r>.json before the communicator's timeout (5 s in the test) ends the job.
  monitor::AlertRule hang_rule;
  hang_rule.name = "hang";
  hang_rule.condition = "hang";
  hang_rule.timeout = 2.0;
  hang_rule.actions = "log";
  cfg.alerts = {hang_rule};
  auto t = train::Trainer::create(cfg, world);
  if (!t.is_ok()) comm::MpiRuntime::abort(2);
  t.value()->show_progress = false;
  // The last parameter's gradient is among the first to be ready in backward.
  const Tensor p = t.value()->model().named_parameters().back().second;
  int backwards = 0;
  autograd::register_grad_ready_hook(p, [&](const Tensor&) {
    if (world->rank() == victim && ++backwards == 3) {
      std::fprintf(stderr, "rank_failure_probe: rank %d %s now (step 3, in backward)\n", victim,
                   hang ? "hangs" : "kills itself");
      std::fflush(stderr);
      if (hang) {
        for (;;) ::pause();
      }
      std::raise(SIGKILL);
    }
  });
  const Status s = t.value()->run();
  std::fprintf(stderr, "rank_failure_probe: rank %d finished training (%s)\n", world->rank(), s.to_string().c_str());
  return 0;
}
