#include "planner/measure.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <random>
#include <vector>

#include "core/factory.h"
#include "data/token_file.h"
#include "train/trainer.h"

namespace trident::planner {
namespace {

double process_cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

}  // namespace

// Note [Measured step time]
// A step's wall time on a machine shared with other work only grows: the fastest of the
// measured steps is the closest to what the layout costs, so that is the one reported (and
// compared with the prediction), with its CPU time beside it.
StatusOr<Measurement> measure_layout(train::TrainConfig cfg, std::shared_ptr<comm::Communicator> comm,
                                     const std::string& scratch_dir, int64_t warmup, int64_t steps) {
  const int rank = comm ? comm->rank() : 0;
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path dir = fs::path(scratch_dir) / ("rank" + std::to_string(rank));
  fs::create_directories(dir, ec);
  if (ec) return Status::io_error("measure_layout: cannot create '" + dir.string() + "': " + ec.message());
  // Enough random tokens for any window of seq_len + 1; every rank writes its own file.
  const int64_t n = std::max<int64_t>(4 * cfg.data.batch_size * cfg.data.seq_len, 4 * (cfg.data.seq_len + 1));
  std::mt19937 gen(static_cast<unsigned>(1234 + rank));
  std::uniform_int_distribution<int64_t> token(0, cfg.model.vocab_size - 1);
  const fs::path tokens = dir / "train.bin";
  Status written = Status::ok();
  if (cfg.model.vocab_size <= 65536) {
    std::vector<uint16_t> ids(static_cast<size_t>(n));
    for (uint16_t& id : ids) id = static_cast<uint16_t>(token(gen));
    written = data::write_token_file(tokens, ids);
  } else {
    std::vector<uint32_t> ids(static_cast<size_t>(n));
    for (uint32_t& id : ids) id = static_cast<uint32_t>(token(gen));
    written = data::write_token_file32(tokens, ids);
  }
  if (!written.is_ok()) return written;
  cfg.data.train_file = tokens.string();
  cfg.data.val_file = "";
  cfg.train.out_dir = (dir / "run").string();
  cfg.train.resume = false;
  cfg.train.steps = warmup + steps + 1;  // never at the end: no final checkpoint
  cfg.train.checkpoint_interval = 0;
  cfg.train.eval_interval = 0;
  cfg.train.profile_step = 0;
  cfg.train.mfu = false;
  cfg.monitor.port = 0;
  auto created = train::Trainer::create(cfg, comm);
  if (!created.is_ok()) return created.status();
  train::Trainer& trainer = *created.value();
  trainer.show_progress = false;
  Measurement out;
  double best = 1e300, best_cpu = 0.0, cpu_before = 0.0;
  trainer.on_step = [&](const train::StepMetrics& m) {
    if (m.step == warmup) host_allocator().reset_peak_stats();
    if (m.step > warmup) {
      const double cpu = process_cpu_seconds();
      if (m.step_s < best) {
        best = m.step_s;
        best_cpu = cpu - cpu_before;
      }
    }
    cpu_before = process_cpu_seconds();
  };
  if (warmup == 0) host_allocator().reset_peak_stats();
  cpu_before = process_cpu_seconds();
  if (Status s = trainer.run(warmup + steps); !s.is_ok()) return s;
  const MemoryStats stats = host_allocator().stats();
  Tensor peaks = empty({kNumMemoryCategories}, DType::kF64);
  for (int c = 0; c < kNumMemoryCategories; ++c)
    peaks.data_ptr<double>()[c] = static_cast<double>(stats.by_category[static_cast<size_t>(c)].peak);
  if (comm && comm->size() > 1) comm->all_reduce(peaks, comm::ReduceOp::kMax);
  for (int c = 0; c < kNumMemoryCategories; ++c)
    out.peak_bytes[static_cast<size_t>(c)] = static_cast<int64_t>(peaks.data_ptr<double>()[c]);
  out.step_s = best;
  out.step_cpu_s = best_cpu;
  if (comm && comm->size() > 1) {  // the busiest rank's: a pipeline's first stage idles through its bubble
    Tensor cpu = full({1}, best_cpu, DType::kF64);
    comm->all_reduce(cpu, comm::ReduceOp::kMax);
    out.step_cpu_s = cpu.item();
  }
  return out;
}

}  // namespace trident::planner
