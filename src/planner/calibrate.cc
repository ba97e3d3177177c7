#include "planner/calibrate.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "autograd/functions.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "core/views.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/gemm_engine.h"
#include "core/half.h"
#include "kernels/cpu/gemm_rates.h"
#include "kernels/cpu/matmul.h"
#include "models/registry.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/loss.h"
#include "ops/vocab_parallel.h"
#include "offload/nvme_file.h"
#include "planner/collectives.h"

namespace trident::planner {
namespace {

using Clock = std::chrono::steady_clock;

// CPU seconds of this process per thread: on a machine shared with other work a rank's CPU
// time is what its compute costs, where its wall time also counts the others' (the planner's
// accuracy bench compares step CPU times alike).
double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return (static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
          static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6) /
         static_cast<double>(num_threads());
}

// The fastest call of `f` over about `seconds` (at least three calls, after one warm-up), in
// CPU seconds per thread.
double fastest_seconds(const std::function<void()>& f, double seconds) {
  f();
  double best = 1e300;
  const auto start = Clock::now();
  for (int i = 0; i < 3 || std::chrono::duration<double>(Clock::now() - start).count() < seconds; ++i) {
    const double t0 = cpu_seconds();
    f();
    best = std::min(best, std::max(cpu_seconds() - t0, 1e-7));
    if (i > 1000) break;
  }
  return best;
}

// Note [GEMMs out of the caches]
// A training step's GEMMs find their operands out of the caches: the weights were last touched
// a whole forward or backward ago, and the activations between products pass through norms,
// SwiGLU, routing and the loss first. Timed again and again on the same buffers, a block's
// products ran faster than on operands evicted between calls (one Zen 4 core, oneDNN f32:
// 2048 x 256 x 256 at 94-98 against 83-86 GFLOP/s, tiny-moe's expert shapes at 90-102 against
// 82-94), and train.profile_step measured a step's products at the evicted rate (tiny-moe's
// linears and grouped expert products at 80-81 GFLOP/s). So each shape is timed on enough
// copies of its operands to span kColdOperandBytes, each call on the next copy: more than the
// last-level cache of the CPUs the project runs on (32 MiB per Zen CCD), whatever `getconf`
// says (320 MiB in these VMs: the host's, not the slice this process sees). A shape larger than
// that is one copy, which its own streaming already keeps out of the caches; one under 8 KiB
// (4096 copies at most) stays in them, and is too small to matter.
constexpr double kColdOperandBytes = 256.0 * (1 << 20);

// GFLOP/s of the process's GEMM engine for T over the model's GEMM shapes (weighted by their
// FLOPs: a step's GEMM FLOPs over its GEMM time), operands out of the caches
// (Note [GEMMs out of the caches]), each shape after `together` (every rank's barrier: Note
// [Ranks measured together]).
template <class T>
double gemm_gflops(const std::vector<kernels::cpu::GemmShape>& shapes, double seconds_per_shape,
                   const std::function<void()>& together) {
  double flops = 0.0, time = 0.0;
  for (const kernels::cpu::GemmShape& g : shapes) {
    const double bytes = static_cast<double>(g.M * g.K + g.K * g.N + g.M * g.N) * sizeof(T);
    const size_t copies = static_cast<size_t>(std::clamp(std::ceil(kColdOperandBytes / bytes), 1.0, 4096.0));
    std::vector<std::vector<T>> a(copies), b(copies), c(copies);
    for (size_t i = 0; i < copies; ++i) {
      a[i].assign(static_cast<size_t>(g.M * g.K), T(0.25f));
      b[i].assign(static_cast<size_t>(g.K * g.N), T(0.5f));
      c[i].assign(static_cast<size_t>(g.M * g.N), T(0.0f));
    }
    const int64_t lda = g.trans_a ? g.M : g.K, ldb = g.trans_b ? g.K : g.N;
    size_t next = 0;
    together();
    const double s = fastest_seconds(
        [&] {
          const size_t i = next++ % copies;
          kernels::cpu::gemm<T>(g.trans_a, g.trans_b, g.M, g.N, g.K, 1.0f, a[i].data(), lda, b[i].data(), ldb, 0.0f,
                                c[i].data(), g.N);
        },
        seconds_per_shape);
    flops += g.flops() * static_cast<double>(g.count);
    time += s * static_cast<double>(g.count);
  }
  return flops / time / 1e9;
}

// The same GEMMs with every model dimension halved: the rows (forward's and dx's M, dW's K)
// and the vocabulary kept (Note [GEMMs by shape]).
std::vector<kernels::cpu::GemmShape> halved_width(std::vector<kernels::cpu::GemmShape> shapes, int64_t vocab) {
  auto half = [&](int64_t& d) {
    if (d != vocab) d = std::max<int64_t>(1, d / 2);
  };
  for (kernels::cpu::GemmShape& g : shapes) {
    if (g.name.ends_with(" dW")) {
      half(g.M);
      half(g.N);
    } else {
      half(g.N);
      half(g.K);
    }
  }
  return shapes;
}

// The FLOP-weighted mean of 1 / x(g) over the GEMMs (x = 0: left out of the sum, not the weight).
double flop_weighted_mean_inverse(const std::vector<kernels::cpu::GemmShape>& shapes,
                                  double (*x)(const kernels::cpu::GemmShape&)) {
  double weighted = 0.0, flops = 0.0;
  for (const kernels::cpu::GemmShape& g : shapes) {
    const double f = g.flops() * static_cast<double>(g.count);
    flops += f;
    if (const double v = x(g); v > 0.0) weighted += f / v;
  }
  return flops > 0.0 ? weighted / flops : 0.0;
}

// The mean 1/K over the forward and dx GEMMs (dW's K is the rows: left out).
double mean_inverse_k(const std::vector<kernels::cpu::GemmShape>& shapes) {
  return flop_weighted_mean_inverse(shapes, [](const kernels::cpu::GemmShape& g) {
    return g.name.ends_with(" dW") ? 0.0 : static_cast<double>(g.K);
  });
}

// The mean 1/rows: each GEMM's rows are its M (forward, dx) or, for dW, its K. The head's
// chunks and a mixture's experts run fewer rows than the micro-batch's (Note [Head chunks],
// Note [The time of a mixture of experts]), and a fixed chunk's rows do not grow with the
// batch, so the fit of gemm_half_rows takes the rows each GEMM runs.
double mean_inverse_rows(const std::vector<kernels::cpu::GemmShape>& shapes) {
  return flop_weighted_mean_inverse(shapes, [](const kernels::cpu::GemmShape& g) {
    return static_cast<double>(g.name.ends_with(" dW") ? g.K : g.M);
  });
}

// A rate that falls off in x as 1/r = a + b x (x: 1/rows, 1/head size, mean 1/K), through
// two measurements: the rate at x = 0 (1/a) and the x at which it is half that, as 1/x (b/a).
// None unless both are positive: a second measurement as fast is no fall-off.
struct FallOff {
  double peak = 0.0, half = 0.0;
};
std::optional<FallOff> fit_fall_off(double x1, double r1, double x2, double r2) {
  const double b = (1.0 / r1 - 1.0 / r2) / (x1 - x2), a = 1.0 / r1 - b * x1;
  if (!(a > 0.0 && b > 0.0) || !std::isfinite(a) || !std::isfinite(b)) return std::nullopt;
  return FallOff{1.0 / a, b / a};
}

}  // namespace

// Note [Calibrating the disk]
// Why through the tier's own file and not fio's figures? The tier's rate is what its requests
// get: offload::NvmeFile with O_DIRECT and io_uring, the run's queue depth, 1 MiB requests and a
// CRC-32C of every extent on the calling thread, on extents of one unit's region (3 x
// nvme_buffer_mb) through nvme_buffer_count buffers, each written whole and read back whole, as
// a step does. So calibrate writes about `bytes` that way, then reads them back, twice, and
// keeps each direction's faster pass. Every rank does so at once (each its own file, as the
// tier's), and the node's rate is all the ranks' bytes over the slowest rank's time: the
// cluster file's disk rates are the node's, shared by its ranks (Note [The tier's step time]).
// The file is removed from the directory once open (NvmeFile), so nothing is left behind.
DiskRates calibrate_disk(const parallel::ParallelOptions& p, const std::shared_ptr<comm::Communicator>& comm,
                         int64_t bytes) {
  const int64_t unit = std::max<int64_t>(64, static_cast<int64_t>(p.nvme_buffer_mb * (1 << 20) / 4));
  const int64_t extent = std::min(3 * offload::nvme_aligned(4 * unit), offload::nvme_aligned(bytes));
  const int64_t extents = std::max<int64_t>(1, bytes / extent);
  offload::NvmeFileOptions o;
  o.queue_depth = static_cast<int>(p.nvme_queue_depth);
  char host[256] = "host";
  ::gethostname(host, sizeof host - 1);
  const auto file = offload::NvmeFile::create(
      std::filesystem::path(p.nvme_path) / ("trident-calibrate-" + std::string(host) + "-" + std::to_string(::getpid()) + ".disk"),
      extents * extent, o, "parallel.nvme_path");
  std::vector<offload::AlignedBuffer> buffers;
  for (int64_t i = 0; i < std::min<int64_t>(extents, p.nvme_buffer_count); ++i) {
    buffers.emplace_back(extent);
    auto* b = static_cast<uint8_t*>(buffers.back().data());
    for (int64_t k = 0; k < extent; ++k) b[k] = static_cast<uint8_t>((k * 131 + i * 7) >> 3);  // not all zeros
  }
  // Seconds for every extent, each through the next buffer once its last request is done.
  auto pass = [&](bool read) {
    std::vector<std::optional<offload::NvmeFile::Ticket>> last(buffers.size());
    if (comm) comm->barrier();
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < extents; ++i) {
      auto& slot = last[static_cast<size_t>(i) % buffers.size()];
      if (slot) file->wait(*slot);
      void* data = buffers[static_cast<size_t>(i) % buffers.size()].data();
      slot = read ? file->read(i * extent, data, extent) : file->write(i * extent, data, extent);
    }
    file->wait_all();
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (comm && comm->size() > 1) {
      Tensor worst = full({1}, s, DType::kF64);
      comm->all_reduce(worst, comm::ReduceOp::kMax);
      s = worst.item();
    }
    return s;
  };
  double write_s = 1e300, read_s = 1e300;
  for (int i = 0; i < 2; ++i) {
    write_s = std::min(write_s, pass(false));
    read_s = std::min(read_s, pass(true));
  }
  const double node_bytes = static_cast<double>(extents * extent) * static_cast<double>(comm ? comm->size() : 1);
  return {node_bytes / read_s / 1e9, node_bytes / write_s / 1e9};
}

Cluster calibrate(const train::TrainConfig& config, const std::shared_ptr<comm::Communicator>& comm,
                  const CalibrationOptions& options) {
  train::TrainConfig cfg = config;
  if (cfg.train.threads > 0) set_num_threads(static_cast<int>(cfg.train.threads));
  const int64_t ranks = comm ? comm->size() : 1;
  Cluster c = local_cluster(ranks);
  c.shape.name = "this machine, calibrated (" + std::to_string(ranks) + " rank(s), " + std::to_string(num_threads()) +
                 " thread(s) each)";
  // GEMMs at the model's shapes on the engine this run resolves to, per dtype, at two
  // micro-batch sizes (one sequence, and the batch's share of a rank): 1/rate = (1 + h/n)/peak.
  const int64_t B = std::max<int64_t>(1, cfg.data.batch_size / ranks), T = cfg.data.seq_len;
  const models::ModelFamily& family = models::model_family(cfg.model.arch);
  // Note [Ranks measured together]
  // A node's ranks share its cores' caches, memory and (on SMT siblings) execution units, and in
  // a step they compute together: the collectives keep them in lock step. Each rate is therefore
  // measured on every rank at once, after a barrier. Unsynchronized, the ranks drift apart within
  // seconds and one rank's GEMMs can run beside the other's memory test. Two 2-rank calibrations
  // of tiny-moe on one Zen 4 host then gave a peak of 98.5 and 117.5 GFLOP/s per rank, at the same
  // measured step times (the second predicted every row 10-26% fast), where one rank alone
  // measured 102-111. With the barriers two calibrations a minute apart still gave 103.8 and
  // 108.3, and 43.0 and 35.7 GB/s: the VM's own spread, and a rank that ends its timed calls
  // first leaves the other's last calls to run alone, which the fastest-of keeps (a count of
  // calls agreed by the ranks would close that).
  const std::function<void()> together = [&] {
    if (comm && ranks > 1) comm->barrier();
  };
  auto gflops = [&](bool is_bf16, const std::vector<kernels::cpu::GemmShape>& shapes) {
    cfg.kernels.resolved(is_bf16).apply(is_bf16);
    return is_bf16 ? gemm_gflops<trident::bf16>(shapes, options.seconds_per_measure / 10.0, together)
                   : gemm_gflops<float>(shapes, options.seconds_per_measure / 10.0, together);
  };
  auto rate = [&](bool is_bf16, int64_t rows_b) { return gflops(is_bf16, family.gemm_shapes(cfg.model, rows_b, T)); };
  double f32 = rate(false, B), bf16 = rate(true, B);
  double half_rows = 0.0;
  if (B > 1) {
    const bool is_bf16 = cfg.uses_bf16_gemms();
    const double small = rate(is_bf16, 1), large = is_bf16 ? bf16 : f32;
    // 1/r = (1 + half_rows x) / peak, x the mean 1/rows of one sequence's GEMMs and the batch's.
    if (const auto fit = fit_fall_off(mean_inverse_rows(family.gemm_shapes(cfg.model, 1, T)), small,
                                      mean_inverse_rows(family.gemm_shapes(cfg.model, B, T)), large)) {
      half_rows = fit->half;
      (is_bf16 ? bf16 : f32) = fit->peak;
    }
  }
  // Note [GEMMs by shape]: the model's GEMMs at its width and at half of it, timed one after the
  // other. 1/r = (1 + h S) / peak with S = mean_inverse_k: two widths give h = gemm_half_k, and
  // the peaks grow by (1 + h S) at the model's width, so that the model at its own width keeps
  // its measured rate. A fit that is not a fall-off (the half width as fast) keeps none.
  double half_k = 0.0;
  {
    const bool is_bf16 = cfg.uses_bf16_gemms();
    const auto full = family.gemm_shapes(cfg.model, B, T);
    const auto half = halved_width(full, cfg.model.vocab_size);
    const double r1 = gflops(is_bf16, full);
    if (const auto fit = fit_fall_off(mean_inverse_k(full), r1, mean_inverse_k(half), gflops(is_bf16, half))) {
      half_k = fit->half;
      f32 *= fit->peak / r1;
      bf16 *= fit->peak / r1;
    }
  }
  cfg.kernels.resolved(cfg.uses_bf16_gemms()).apply(cfg.uses_bf16_gemms());
  c.device.gemm_half_k = half_k;
  c.device.gemm_half_rows = half_rows;
  c.device.peak_tflops_fp32 = f32 / 1e3;
  c.device.peak_tflops_bf16 = bf16 / 1e3;
  c.device.peak_tflops_fp16 = f32 / 1e3;  // fp16 GEMMs widen to f32 on the host
  c.device.gemm_efficiency = 1.0;
  const DType dtype = cfg.precision.compute_dtype();
  const double gemm = dtype == DType::kBF16 ? bf16 * 1e9 : f32 * 1e9;

  // Note [Attention by head size]
  // Attention's FLOPs per token are 2 T C forward (causal), 3.5x with the backward, whatever
  // the heads; its rate is not: each head's QK^T and PV are products d wide (flash attention's
  // tiles, a CPU kernel's dot products), so the same width measures slower in more, smaller
  // heads (issue #53: the same shape with 64, 96 or 128 heads up to 1.5x apart). As with the
  // GEMMs' rows, 1/rate = a + b/d: timed at the model's head size d and at half of it (twice
  // the heads, the same width), peak = 1/a (attention_efficiency = peak / the GEMM rate) and
  // attention_half_head_size = b/a. A fit that is not a fall-off (b <= 0: the smaller heads
  // as fast) keeps the model's own rate and no fall-off.
  {
    const int64_t C = cfg.model.n_embd;
    auto attention_rate = [&](int64_t HS) {
      const int64_t NH = C / HS;
      Generator gen(7);
      Tensor q = randn({B, NH, T, HS}, gen, dtype), kk = randn({B, NH, T, HS}, gen, dtype),
             v = randn({B, NH, T, HS}, gen, dtype);
      q.set_requires_grad(true);
      kk.set_requires_grad(true);
      v.set_requires_grad(true);
      together();
      const double s = fastest_seconds(
          [&] {
            autograd::backward(sum(attention(q, kk, v, true)));
            q.zero_grad();
            kk.zero_grad();
            v.zero_grad();
          },
          options.seconds_per_measure);
      return 3.5 * 2.0 * static_cast<double>(B * T * T * NH * HS) / s;
    };
    const int64_t HS = cfg.model.n_embd / cfg.model.n_head;
    const double own = attention_rate(HS);
    c.device.attention_efficiency = std::clamp(own / gemm, 0.01, 2.0);
    c.device.attention_half_head_size = 0.0;
    if (HS % 2 == 0 && HS >= 8) {
      const double d = static_cast<double>(HS);
      if (const auto fit = fit_fall_off(1.0 / d, own, 2.0 / d, attention_rate(HS / 2))) {
        c.device.attention_efficiency = std::clamp(fit->peak / gemm, 0.01, 2.0);
        c.device.attention_half_head_size = fit->half;
      }
    }
  }
  // Memory-bound ops: an in-place add over a buffer far larger than the caches (reads 2, writes 1),
  // every rank at once (Note [Ranks measured together]): 2 unsynchronized ranks of one Zen 4 host
  // measured 30.7 GB/s each where one alone measured 27.2, and a 2-rank ep2 step's AdamW and
  // clipping ran at 16-19 GB/s of their bytes (train.profile_step).
  {
    together();
    const int64_t n = int64_t{1} << 24;
    Tensor a = full({n}, 1.0, DType::kF32), b = full({n}, 2.0, DType::kF32);
    const double s = fastest_seconds([&] { ops::add_(a, b); }, options.seconds_per_measure);
    c.device.memory_bandwidth_gbs = 3.0 * 4.0 * static_cast<double>(n) / s / 1e9;
  }
  // The vocabulary-parallel loss's local passes (Note [The vocabulary-parallel loss's time]):
  // the compute dtype's (rows, V / 2) logits cast to f32, maxima, sums and gradient, and the
  // gradient cast back, per logit, as parallel/tp_collectives.cc runs them. 1024 rows, so the
  // f32 logits outgrow the caches as a micro-batch's do (256 rows of GPT-2's fit a Zen 5's L3:
  // 1.0 ns per logit measured there against 1.65 in a tp2 step).
  {
    const int64_t N = 1024, V = std::max<int64_t>(1, cfg.model.vocab_size / 2);
    Generator gen(11);
    const Tensor logits = randn({N, V}, gen, dtype);
    const Tensor targets = zeros({N}, DType::kI64);
    together();
    const double s = fastest_seconds(
        [&] {
          const Tensor l = core::cast(logits, DType::kF32);
          const Tensor row_max = ops::vocab_parallel_row_max(l);
          const Tensor sums = ops::vocab_parallel_sums(l, row_max, targets, 0);
          const Tensor g = ops::vocab_parallel_backward(l, row_max, sums, targets, 0, -1, 1.0);
          if (logits.dtype() != DType::kF32) (void)core::cast(g, logits.dtype());
        },
        options.seconds_per_measure);
    c.device.vocab_loss_ns_per_logit = s / static_cast<double>(N * V) * 1e9;
  }
  // The fused loss's passes outside its GEMMs (Note [The fused loss's time]): log-sum-exp and
  // softmax - onehot in place, as ops::linear_cross_entropy runs them on each chunk's logits of
  // the compute dtype, per logit: a micro-batch's host chunk (ops/loss.h), out of the caches as there.
  {
    const int64_t V = std::max<int64_t>(1, cfg.model.vocab_size);
    const int64_t N = std::min(ops::linear_cross_entropy_chunk_rows(V, false), B * T);
    Generator gen(13);
    const Tensor logits = randn({N, V}, gen, dtype);
    const std::vector<int64_t> targets(static_cast<size_t>(N), 0);
    double s = 0.0;
    ops::dispatch_floating(dtype, "calibrate", [&]<class T>() {
      std::vector<acc_t<T>> logsumexp(static_cast<size_t>(N));
      T* lg = logits.data_ptr<T>();
      together();
      s = fastest_seconds(
          [&] {
            kernels::cpu::cross_entropy_forward<T, int64_t>(logsumexp.data(), lg, targets.data(), N, V, -1);
            kernels::cpu::cross_entropy_backward<T, int64_t>(lg, lg, logsumexp.data(), targets.data(), N, V, -1, 1.0);
          },
          options.seconds_per_measure);
    });
    c.device.fused_loss_ns_per_logit = s / static_cast<double>(N * V) * 1e9;
  }
  // The all-reduce's alpha-beta over the ranks: small and large messages.
  if (comm && ranks > 1) {
    // A collective's fastest of 5 runs, on its slowest rank.
    auto fastest_of = [&](const std::function<void()>& run) {
      double best = 1e300;
      for (int i = 0; i < 5; ++i) {
        comm->barrier();
        const auto t0 = Clock::now();
        run();
        best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
      }
      Tensor worst = full({1}, best, DType::kF64);
      comm->all_reduce(worst, comm::ReduceOp::kMax);
      return worst.item();
    };
    auto time_all_reduce = [&](int64_t elems) {
      Tensor t = full({elems}, 1.0, DType::kF32);
      return fastest_of([&] { comm->all_reduce(t); });
    };
    const int64_t small = 256, large = int64_t{1} << 22;
    const double ts = time_all_reduce(small), tl = time_all_reduce(large);
    const double k = static_cast<double>(ranks - 1), n = static_cast<double>(ranks);
    // t = 2 k alpha + 2 k / n x bytes / bw
    const double per_byte = std::max((tl - ts) / (4.0 * static_cast<double>(large - small)), 1e-13);
    c.intra.bandwidth_gbs = 2.0 * k / n / per_byte / 1e9;
    c.intra.latency_us = std::max(0.0, (ts - 2.0 * k / n * 4.0 * static_cast<double>(small) * per_byte) / (2.0 * k)) * 1e6;
    // Note [Collectives as measured]: ZeRO's reduce-scatter and all-gather, in place and
    // asynchronous as the trainer posts them, over the ring model's time at the fitted rates.
    const Tensor buffer = full({large}, 1.0, DType::kF32);
    const int64_t part = large / ranks;
    const Tensor whole = views::narrow(buffer, 0, 0, part * ranks);  // ranks x part elements
    const Tensor mine = views::narrow(buffer, 0, static_cast<int64_t>(comm->rank()) * part, part);
    const double rs = fastest_of(
        [&] { comm->reduce_scatter_async(whole, views::narrow(buffer, 0, 0, part), comm::ReduceOp::kSum)->wait(); });
    const double ag = fastest_of([&] { comm->all_gather_async(mine, whole)->wait(); });
    const double ring_half = reduce_scatter_seconds(4.0 * static_cast<double>(part * ranks), ranks, c.intra);
    c.intra.reduce_scatter_factor = std::clamp(rs / ring_half, 0.01, 100.0);
    c.intra.all_gather_factor = std::clamp(ag / ring_half, 0.01, 100.0);
    static_cast<LinkSpec&>(c.inter) = static_cast<const LinkSpec&>(c.intra);  // one host: the same link
  }
  c.device.comm_overlap = 0.0;  // MPI on CPU ranks progresses only inside its calls
  // The NVMe tier's disk, where the run names one (Note [Calibrating the disk]).
  if (!cfg.parallel.nvme_path.empty()) {
    const DiskRates disk = calibrate_disk(cfg.parallel, comm, options.disk_bytes);
    c.shape.disk_read_gbs = disk.read_gbs;
    c.shape.disk_write_gbs = disk.write_gbs;
  }
  return c;
}

}  // namespace trident::planner
