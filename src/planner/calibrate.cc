#include "planner/calibrate.h"

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "autograd/functions.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/half.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "core/views.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/gemm_engine.h"
#include "kernels/cpu/gemm_rates.h"
#include "kernels/cpu/matmul.h"
#include "models/registry.h"
#include "offload/nvme_file.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/loss.h"
#include "ops/vocab_parallel.h"
#include "planner/calibration_timer.h"
#include "planner/collective_skew.h"
#include "planner/collectives.h"

namespace trident::planner {
namespace {

using Clock = std::chrono::steady_clock;

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
// (4096 copies at most) stays in them, and is too small to matter. Every shape's copies lie in
// the same two arenas (timed in turns, Note [Rates timed in turns]): inputs, filled once with
// 0.25 in bf16 (0x3E80, whose pairs read as f32 0.2504), and outputs, never read (beta = 0),
// so no shape's results become another's inputs and nothing grows towards inf or denormals.
constexpr double kColdOperandBytes = 256.0 * (1 << 20);

class GemmOperands {
 public:
  // The copies of g's operands in elements of `element` bytes; reserves their room.
  int64_t copies(const kernels::cpu::GemmShape& g, int64_t element) {
    const double bytes = static_cast<double>(g.M * g.K + g.K * g.N + g.M * g.N) * static_cast<double>(element);
    const auto n = static_cast<int64_t>(std::clamp(std::ceil(kColdOperandBytes / bytes), 1.0, 4096.0));
    in_bytes_ = std::max(in_bytes_, n * (aligned(g.M * g.K * element) + aligned(g.K * g.N * element)));
    out_bytes_ = std::max(out_bytes_, n * aligned(g.M * g.N * element));
    return n;
  }
  // Allocates what the copies reserved, before the first call.
  void allocate() {
    in_.resize(static_cast<size_t>(in_bytes_ + 64));
    for (size_t i = 0; i < in_.size(); i += 2) {  // bf16 0.25 (0x3E80), little-endian
      in_[i] = std::byte{0x80};
      if (i + 1 < in_.size()) in_[i + 1] = std::byte{0x3E};
    }
    out_.assign(static_cast<size_t>(out_bytes_ + 64), std::byte{0});
  }
  // Copy i's operands of g: A, B and C.
  template <class T>
  std::tuple<const T*, const T*, T*> copy(const kernels::cpu::GemmShape& g, int64_t i) {
    const int64_t a = aligned(g.M * g.K * sizeof(T)), b = aligned(g.K * g.N * sizeof(T));
    const int64_t c = aligned(g.M * g.N * sizeof(T));
    std::byte* in = base(in_) + i * (a + b);
    std::byte* out = base(out_) + i * c;
    return {reinterpret_cast<const T*>(in), reinterpret_cast<const T*>(in + a), reinterpret_cast<T*>(out)};
  }

 private:
  static int64_t aligned(int64_t bytes) { return (bytes + 63) / 64 * 64; }
  static std::byte* base(std::vector<std::byte>& v) {  // the first 64-byte boundary
    const auto p = reinterpret_cast<uintptr_t>(v.data());
    return v.data() + ((p + 63) / 64 * 64 - p);
  }
  int64_t in_bytes_ = 0, out_bytes_ = 0;
  std::vector<std::byte> in_, out_;  // byte storage: read as the GEMM's element type
};

// A set of GEMMs (the model's, at one micro-batch and width) timed shape by shape, each an item
// of the calibration's timer; its rate is its FLOPs over its time (weighted by each shape's
// count: a step's GEMM FLOPs over its GEMM time), operands out of the caches.
struct GemmSet {
  std::vector<kernels::cpu::GemmShape> shapes;
  std::vector<size_t> items;
  // GFLOP/s, after the timer's run.
  double gflops(const CalibrationTimer& timer) const {
    double flops = 0.0, time = 0.0;
    for (size_t i = 0; i < shapes.size(); ++i) {
      flops += shapes[i].flops() * static_cast<double>(shapes[i].count);
      time += timer.seconds(items[i]) * static_cast<double>(shapes[i].count);
    }
    return flops / time / 1e9;
  }
};

template <class T>
GemmSet add_gemm_set(std::vector<kernels::cpu::GemmShape> shapes, double seconds_per_shape, GemmOperands& operands,
                     CalibrationTimer& timer) {
  GemmSet set{std::move(shapes), {}};
  for (const kernels::cpu::GemmShape& g : set.shapes) {
    const int64_t copies = operands.copies(g, sizeof(T));
    auto next = std::make_shared<int64_t>(0);
    set.items.push_back(timer.add(
        [g, copies, next, &operands] {
          const auto [a, b, c] = operands.copy<T>(g, (*next)++ % copies);
          kernels::cpu::gemm<T>(g.trans_a, g.trans_b, g.M, g.N, g.K, 1.0f, a, g.trans_a ? g.M : g.K, b,
                                g.trans_b ? g.K : g.N, 0.0f, c, g.N);
        },
        seconds_per_shape));
  }
  return set;
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
    return slowest_rank(comm.get(), std::chrono::duration<double>(Clock::now() - t0).count());
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
  // Every rate below is an item of one timer: called in turns, every rank at once (Note [Ranks
  // measured together], Note [Rates timed in turns]); the items are added, run, then read.
  CalibrationTimer timer(comm, options.rounds);
  const double gemm_seconds = options.seconds_per_measure / 5.0, seconds = options.seconds_per_measure;
  const DType dtype = cfg.precision.compute_dtype();
  const bool run_bf16 = cfg.uses_bf16_gemms();

  // GEMMs at the model's shapes on the engine this run resolves to, per dtype, at two
  // micro-batch sizes (one sequence, and the batch's share of a rank): 1/rate = (1 + h/n)/peak;
  // and at half the model's width (Note [GEMMs by shape]). Both dtypes' engines at once: the
  // f32 engine is the same either way.
  const int64_t B = std::max<int64_t>(1, cfg.data.batch_size / ranks), T = cfg.data.seq_len;
  const models::ModelFamily& family = models::model_family(cfg.model.arch);
  cfg.kernels.resolved(true).apply(true);
  GemmOperands operands;
  auto add_set = [&](bool is_bf16, std::vector<kernels::cpu::GemmShape> shapes) {
    return is_bf16 ? add_gemm_set<trident::bf16>(std::move(shapes), gemm_seconds, operands, timer)
                   : add_gemm_set<float>(std::move(shapes), gemm_seconds, operands, timer);
  };
  const std::vector<kernels::cpu::GemmShape> full_width = family.gemm_shapes(cfg.model, B, T);
  const GemmSet f32_set = add_set(false, full_width), bf16_set = add_set(true, full_width);
  const std::optional<GemmSet> one_sequence =
      B > 1 ? std::optional<GemmSet>(add_set(run_bf16, family.gemm_shapes(cfg.model, 1, T))) : std::nullopt;
  const GemmSet half_width = add_set(run_bf16, halved_width(full_width, cfg.model.vocab_size));

  // Note [Attention by head size]
  // Attention's FLOPs per token are 2 T C forward (causal), 3.5x with the backward, whatever
  // the heads; its rate is not: each head's QK^T and PV are products d wide (flash attention's
  // tiles, a CPU kernel's dot products), so the same width measures slower in more, smaller
  // heads (issue #53: the same shape with 64, 96 or 128 heads up to 1.5x apart). As with the
  // GEMMs' rows, 1/rate = a + b/d: timed at the model's head size d and at half of it (twice
  // the heads, the same width), peak = 1/a (attention_efficiency = peak / the GEMM rate) and
  // attention_half_head_size = b/a. A fit that is not a fall-off (b <= 0: the smaller heads
  // as fast) keeps the model's own rate and no fall-off.
  struct Attention {
    int64_t head_size;
    Tensor q, k, v;
    size_t item = 0;
  };
  const int64_t HS = cfg.model.n_embd / cfg.model.n_head;
  std::vector<Attention> attention_sizes;
  for (const int64_t hs : {HS, HS / 2}) {
    if (hs != HS && !(HS % 2 == 0 && HS >= 8)) continue;
    const int64_t NH = cfg.model.n_embd / hs;
    Generator gen(7);
    Attention a{hs, randn({B, NH, T, hs}, gen, dtype), randn({B, NH, T, hs}, gen, dtype),
                randn({B, NH, T, hs}, gen, dtype)};
    for (Tensor* t : {&a.q, &a.k, &a.v}) t->set_requires_grad(true);
    attention_sizes.push_back(std::move(a));
  }
  for (Attention& a : attention_sizes)
    a.item = timer.add(
        [&a] {
          autograd::backward(sum(attention(a.q, a.k, a.v, true)));
          a.q.zero_grad();
          a.k.zero_grad();
          a.v.zero_grad();
        },
        seconds);

  // Memory-bound ops: an in-place add over a buffer far larger than the caches (reads 2, writes 1),
  // every rank at once (Note [Ranks measured together]): 2 unsynchronized ranks of one Zen 4 host
  // measured 30.7 GB/s each where one alone measured 27.2, and a 2-rank ep2 step's AdamW and
  // clipping ran at 16-19 GB/s of their bytes (train.profile_step).
  const int64_t add_n = int64_t{1} << 24;
  Tensor add_a = full({add_n}, 1.0, DType::kF32), add_b = full({add_n}, 2.0, DType::kF32);
  const size_t memory_item = timer.add([&] { ops::add_(add_a, add_b); }, seconds);

  // The vocabulary-parallel loss's local passes (Note [The vocabulary-parallel loss's time]):
  // the compute dtype's (rows, V / 2) logits cast to f32, maxima, sums and gradient, and the
  // gradient cast back, per logit, as parallel/tp_collectives.cc runs them. 1024 rows, so the
  // f32 logits outgrow the caches as a micro-batch's do (256 rows of GPT-2's fit a Zen 5's L3:
  // 1.0 ns per logit measured there against 1.65 in a tp2 step).
  const int64_t vocab_rows = 1024, vocab_half = std::max<int64_t>(1, cfg.model.vocab_size / 2);
  Generator vocab_gen(11);
  const Tensor vocab_logits = randn({vocab_rows, vocab_half}, vocab_gen, dtype);
  const Tensor vocab_targets = zeros({vocab_rows}, DType::kI64);
  const size_t vocab_item = timer.add(
      [&] {
        const Tensor l = core::cast(vocab_logits, DType::kF32);
        const Tensor row_max = ops::vocab_parallel_row_max(l);
        const Tensor sums = ops::vocab_parallel_sums(l, row_max, vocab_targets, 0);
        const Tensor g = ops::vocab_parallel_backward(l, row_max, sums, vocab_targets, 0, -1, 1.0);
        if (vocab_logits.dtype() != DType::kF32) (void)core::cast(g, vocab_logits.dtype());
      },
      seconds);

  // The fused loss's passes outside its GEMMs (Note [The fused loss's time]): log-sum-exp and
  // softmax - onehot in place, as ops::linear_cross_entropy runs them on each chunk's logits of
  // the compute dtype, per logit: a micro-batch's host chunk (ops/loss.h), out of the caches as there.
  const int64_t V = std::max<int64_t>(1, cfg.model.vocab_size);
  const int64_t fused_rows = std::min(ops::linear_cross_entropy_chunk_rows(V, false), B * T);
  Generator fused_gen(13);
  const Tensor fused_logits = randn({fused_rows, V}, fused_gen, dtype);
  const std::vector<int64_t> fused_targets(static_cast<size_t>(fused_rows), 0);
  size_t fused_item = 0;
  ops::dispatch_floating(dtype, "calibrate", [&]<class E>() {
    auto logsumexp = std::make_shared<std::vector<acc_t<E>>>(static_cast<size_t>(fused_rows));
    fused_item = timer.add(
        [&, logsumexp] {
          E* lg = fused_logits.data_ptr<E>();
          kernels::cpu::cross_entropy_forward<E, int64_t>(logsumexp->data(), lg, fused_targets.data(), fused_rows, V, -1);
          kernels::cpu::cross_entropy_backward<E, int64_t>(lg, lg, logsumexp->data(), fused_targets.data(), fused_rows, V,
                                                           -1, 1.0);
        },
        seconds);
  });

  operands.allocate();
  timer.run();
  cfg.kernels.resolved(run_bf16).apply(run_bf16);

  double f32 = f32_set.gflops(timer), bf16 = bf16_set.gflops(timer);
  double half_rows = 0.0;
  if (one_sequence) {
    // 1/r = (1 + half_rows x) / peak, x the mean 1/rows of one sequence's GEMMs and the batch's.
    if (const auto fit = fit_fall_off(mean_inverse_rows(one_sequence->shapes), one_sequence->gflops(timer),
                                      mean_inverse_rows(full_width), run_bf16 ? bf16 : f32)) {
      half_rows = fit->half;
      (run_bf16 ? bf16 : f32) = fit->peak;
    }
  }
  // Note [GEMMs by shape]: the model's GEMMs at its width and at half of it. 1/r = (1 + h S) /
  // peak with S = mean_inverse_k: two widths give h = gemm_half_k, and the peaks grow by (1 + h S)
  // at the model's width, so that the model at its own width keeps its measured rate. A fit that
  // is not a fall-off (the half width as fast) keeps none.
  double half_k = 0.0;
  {
    const double r1 = (run_bf16 ? bf16_set : f32_set).gflops(timer);
    if (const auto fit = fit_fall_off(mean_inverse_k(full_width), r1, mean_inverse_k(half_width.shapes),
                                      half_width.gflops(timer))) {
      half_k = fit->half;
      f32 *= fit->peak / r1;
      bf16 *= fit->peak / r1;
    }
  }
  c.device.gemm_half_k = half_k;
  c.device.gemm_half_rows = half_rows;
  c.device.peak_tflops_fp32 = f32 / 1e3;
  c.device.peak_tflops_bf16 = bf16 / 1e3;
  c.device.peak_tflops_fp16 = f32 / 1e3;  // fp16 GEMMs widen to f32 on the host
  c.device.gemm_efficiency = 1.0;
  const double gemm = dtype == DType::kBF16 ? bf16 * 1e9 : f32 * 1e9;

  auto attention_rate = [&](const Attention& a) {
    const int64_t NH = cfg.model.n_embd / a.head_size;
    return 3.5 * 2.0 * static_cast<double>(B * T * T * NH * a.head_size) / timer.seconds(a.item);
  };
  const double own = attention_rate(attention_sizes[0]);
  c.device.attention_efficiency = std::clamp(own / gemm, 0.01, 2.0);
  c.device.attention_half_head_size = 0.0;
  if (attention_sizes.size() > 1) {
    const double d = static_cast<double>(HS);
    if (const auto fit = fit_fall_off(1.0 / d, own, 2.0 / d, attention_rate(attention_sizes[1]))) {
      c.device.attention_efficiency = std::clamp(fit->peak / gemm, 0.01, 2.0);
      c.device.attention_half_head_size = fit->half;
    }
  }
  c.device.memory_bandwidth_gbs = 3.0 * 4.0 * static_cast<double>(add_n) / timer.seconds(memory_item) / 1e9;
  c.device.vocab_loss_ns_per_logit = timer.seconds(vocab_item) / static_cast<double>(vocab_rows * vocab_half) * 1e9;
  c.device.fused_loss_ns_per_logit = timer.seconds(fused_item) / static_cast<double>(fused_rows * V) * 1e9;

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
      return slowest_rank(comm.get(), best);
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
    // A mixture's exchange as the trainer runs it (parallel/expert_parallel.cc's all_to_all_v),
    // at the model's size: a rank's micro-batch of B T tokens, k routed rows each, C wide, an
    // equal share for every rank; against the time model's (n - 1) / n of the bytes at the
    // fitted rate plus n - 1 latencies.
    if (const models::ModelShapes shapes = family.shapes(cfg.model); shapes.sparse_blocks > 0) {
      const int64_t k_routed = std::max<int64_t>(1, shapes.experts_per_token);
      const int64_t share = std::max<int64_t>(1, B * T * k_routed * cfg.model.n_embd / ranks);
      const Tensor send = full({share * ranks}, 1.0, dtype), recv = full({share * ranks}, 0.0, dtype);
      const std::vector<int64_t> counts(static_cast<size_t>(ranks), share);
      const double a2a = fastest_of([&] { comm->all_to_all_v(send, counts, recv, counts); });
      const double bytes = static_cast<double>(share * ranks) * static_cast<double>(element_size(dtype));
      const double modeled = k / n * bytes / (c.intra.bandwidth_gbs * 1e9) + k * c.intra.latency_us * 1e-6;
      c.intra.all_to_all_factor = std::clamp(a2a / modeled, 0.01, 100.0);
    }
    // Note [The ranks' skew at a blocking collective]: the work between two collectives, a
    // product of the model's width, on rows that keep a unit of work near 67 MFLOP (512 rows at
    // width 256) so that the short segment is several units.
    {
      const int64_t width = cfg.model.n_embd;
      const int64_t rows =
          std::clamp<int64_t>(512 * 256 * 256 / std::max<int64_t>(1, width * width), 16, 512);
      Generator gen(17);
      const Tensor x = randn({rows, width}, gen, DType::kF32),
                   w = randn({width, width}, gen, DType::kF32);
      const CollectiveSkew skew = measure_collective_skew(comm.get(), [&](int64_t units) {
        for (int64_t u = 0; u < units; ++u) (void)ops::matmul(x, w);
      });
      c.device.collective_skew_us = skew.wait_us;
      c.device.collective_skew_fraction = std::min(skew.fraction, 1.0);
    }
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
