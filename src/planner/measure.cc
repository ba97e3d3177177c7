#include "planner/measure.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <random>
#include <vector>

#include "core/cpu_time.h"
#include "core/factory.h"
#include "data/token_file.h"
#include "train/trainer.h"

namespace trident::planner {

// Note [Measured step time]
// A step's time is its wall time on the slowest rank (a pipeline's first stage idles through
// its bubble, so neither its CPU time nor any one rank's clock is the step's), and a step on a
// machine shared with other work only grows: the fastest of the measured steps is the closest
// to what the layout costs, so that is the one reported (and compared with the prediction),
// with the CPU time of the busiest rank beside it.
StatusOr<Measurement> measure_layout(train::TrainConfig cfg, std::shared_ptr<comm::Communicator> comm,
                                     const std::string& scratch_dir, int64_t warmup, int64_t steps,
                                     std::optional<Device> device) {
  const int rank = comm ? comm->rank() : 0;
  // The blocks an earlier measurement's trainer left in the caching allocator go back to the
  // system first: a process measuring layout after layout otherwise keeps the union of their
  // pools (4 ranks of GPT-2 124M grew past 6 GB each after 40 layouts, against 2.3 GB predicted
  // for any one, and the OOM killer ended the job).
  host_allocator().empty_cache();
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
  // The allocators measured: the model's device's, and beside a device the host's two.
  std::optional<Device> model_device = device;  // train.device = "cuda" without a CUDA build: Trainer::create says so
  if (!model_device && cfg.train.device == "cuda" && device_allocator(DeviceType::kCUDA) != nullptr)
    model_device = Device::cuda();
  Allocator& measured = model_device ? *device_allocator(model_device->type) : host_allocator();
  std::vector<Allocator*> host;
  if (model_device) {
    host.push_back(&host_allocator());
    if (&pinned_host_allocator() != &host_allocator()) host.push_back(&pinned_host_allocator());
  }
  const auto reset_peaks = [&] {
    measured.reset_peak_stats();
    for (Allocator* a : host) a->reset_peak_stats();
  };
  if (model_device) measured.empty_cache();
  auto created = train::Trainer::create(cfg, comm, device);
  if (!created.is_ok()) return created.status();
  train::Trainer& trainer = *created.value();
  trainer.show_progress = false;
  Measurement out;
  // Each measured step's wall, CPU and communication-wait time on this rank, [wall..., cpu..., comm...].
  std::vector<double> times(static_cast<size_t>(3 * steps), 0.0);
  double cpu_before = 0.0;
  std::array<int64_t, 2> disk{};  // the tier's bytes of the last measured step
  trainer.on_step = [&](const train::StepMetrics& m) {
    if (m.step == warmup) reset_peaks();
    if (m.nvme && m.step == warmup + steps) disk = {m.nvme->read_bytes, m.nvme->written_bytes};
    if (m.step > warmup && m.step <= warmup + steps) {
      const size_t i = static_cast<size_t>(m.step - warmup - 1);
      times[i] = m.step_s;
      times[i + static_cast<size_t>(steps)] = process_cpu_seconds() - cpu_before;
      times[i + static_cast<size_t>(2 * steps)] = m.comm_wait_s;
    }
    cpu_before = process_cpu_seconds();
  };
  if (warmup == 0) reset_peaks();
  cpu_before = process_cpu_seconds();
  if (Status s = trainer.run(warmup + steps); !s.is_ok()) return s;
  const MemoryStats stats = measured.stats();
  // Every rank's peaks: each fills its row, the sum gathers them; the host's, the largest.
  const int ranks = comm ? comm->size() : 1;
  Tensor peaks = zeros({ranks, kNumMemoryCategories}, DType::kF64);
  Tensor host_peaks = zeros({kNumMemoryCategories}, DType::kF64);
  Tensor disk_bytes = zeros({ranks, 2}, DType::kF64);  // exact below 2^53 bytes
  for (int i = 0; i < 2; ++i) disk_bytes.data_ptr<double>()[rank * 2 + i] = static_cast<double>(disk[static_cast<size_t>(i)]);
  for (int c = 0; c < kNumMemoryCategories; ++c) {
    peaks.data_ptr<double>()[rank * kNumMemoryCategories + c] =
        static_cast<double>(stats.by_category[static_cast<size_t>(c)].peak);
    for (Allocator* a : host)  // pageable and pinned peaks apart: an upper bound of their sum's
      host_peaks.data_ptr<double>()[c] += static_cast<double>(a->stats().by_category[static_cast<size_t>(c)].peak);
  }
  if (ranks > 1) {
    comm->all_reduce(peaks, comm::ReduceOp::kSum);
    comm->all_reduce(host_peaks, comm::ReduceOp::kMax);
    comm->all_reduce(disk_bytes, comm::ReduceOp::kSum);
  }
  for (int q = 0; q < ranks; ++q)
    out.rank_disk_bytes.push_back({static_cast<int64_t>(disk_bytes.data_ptr<double>()[q * 2]),
                                   static_cast<int64_t>(disk_bytes.data_ptr<double>()[q * 2 + 1])});
  for (int c = 0; c < kNumMemoryCategories; ++c)
    out.host_peak_bytes[static_cast<size_t>(c)] = static_cast<int64_t>(host_peaks.data_ptr<double>()[c]);
  out.rank_peak_bytes.assign(static_cast<size_t>(ranks), {});
  for (int q = 0; q < ranks; ++q)
    for (int c = 0; c < kNumMemoryCategories; ++c) {
      const auto bytes = static_cast<int64_t>(peaks.data_ptr<double>()[q * kNumMemoryCategories + c]);
      out.rank_peak_bytes[static_cast<size_t>(q)][static_cast<size_t>(c)] = bytes;
      out.peak_bytes[static_cast<size_t>(c)] = std::max(out.peak_bytes[static_cast<size_t>(c)], bytes);
    }
  // Note [Measured step time]: each step's slowest rank, then the fastest step.
  Tensor t = from_vector(times, Shape{3 * steps});
  if (comm && comm->size() > 1) comm->all_reduce(t, comm::ReduceOp::kMax);
  const std::vector<double> slowest = to_vector<double>(t);
  out.step_s = 1e300;
  for (int64_t i = 0; i < steps; ++i) {
    if (slowest[static_cast<size_t>(i)] < out.step_s) {
      out.step_s = slowest[static_cast<size_t>(i)];
      out.step_cpu_s = slowest[static_cast<size_t>(i + steps)];
      out.comm_wait_s = slowest[static_cast<size_t>(i + 2 * steps)];
    }
  }
  return out;
}

}  // namespace trident::planner
