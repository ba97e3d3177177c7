// trident's side of bench/train_speed_compare.py: times training steps of any family (GPT-2 by default) (forward,
// backward, global-norm clipping, AdamW, zero_grad) on random tokens and prints JSON: every
// step's milliseconds (and CPU milliseconds, "step_cpu_ms"), the median tokens/s of the steps after warm-up, the process's peak RSS,
// the allocator's peak, and optionally the SGEMM rate of this machine (--sgemm) or the GEMM
// rates of every engine at the model's shapes with the MFU against the fastest of the run's
// dtype (--gemm-rates: kernels/cpu/gemm_rates.h, train/mfu.h). --profile profiles one extra
// step after the timed ones (core/profiler.h): its table goes to stderr and its rows, wall time
// and coverage into the JSON as "profile"; on a GPU its clock synchronizes the device at every
// scope boundary, so the rows are GPU time. That step is not in "step_ms", "losses", the median
// or tokens/s (the profiler's overhead does not count in them), and the peak RSS and allocator
// peak are read before it. --profiler-range brackets the timed steps (not the warm-up) with the
// device's external-profiler range (core/device_ops.h: cudaProfilerStart/Stop on CUDA, nothing on
// the host), so that a profiler started with its capture off records only them, without
// synchronizing per op (bench/gpu_kernel_profile.py: Nsight Compute's --profile-from-start off).
//
// Usage: train_step_bench [--arch gpt2|llama [--kv-heads K] [--intermediate I] [--sliding-window W]
//                           [--experts E [--top-k K] [--expert-intermediate I]]]
//          [--layers L] [--embd C] [--heads NH] [--vocab V] [--T T] [--B B]
//          [--steps N] [--warmup W] [--threads N] [--checkpointing none|selective|full]
//          [--precision fp32|bf16|fp16] [--sgemm] [--gemm-rates] [--device cpu|cuda] [--peak-tflops F] [--offload]
//          [--profile] [--profiler-range] [--lora-r R [--lora-alpha A] [--lora-targets q_proj,v_proj]] [--nf4]
// --gemm-rates (CPU) adds "gemm_rates" ({engine: {"dtype", "gflops" (FLOP-weighted over the
// step's shapes), "min_gflops", "max_gflops", "per_shape"}} for both dtypes),
// "gemm_ceiling_gflops" (the fastest of the run's dtype: fp32/fp16 f32, bf16 bf16) and "mfu"
// = "flops_per_token" x tokens/s / ceiling, measured after the steps; "flops_per_token" is
// 6 N + 12 L C T with N = "palm_params", the parameters but gather-only embeddings
// (Note [MFU's N] in train/mfu.h).
// bf16/fp16 run as the trainer does: the model in that dtype, fp32 master weights stepped by
// AdamW (fp16 with a fixed loss scale of 1024 here; no overflow checks). With --device cuda the
// model, optimizer state and batches live on GPU 0 and each step ends with a device
// synchronize, so the times are the GPU's; MFU is then reported against --peak-tflops.
// --offload is ZeRO-Offload: fp32 masters and AdamW state in host memory, stepped on the CPU.
// --lora-r R (R > 0) applies LoRA adapters of rank R before the steps (adapters/lora.h, as the
// trainer's [lora] section does): --lora-alpha A (16) scales them by A / R, --lora-targets lists
// the layers (Note [LoRA targets]; default q_proj,k_proj,v_proj,o_proj for LLaMA, c_attn,attn.c_proj
// for GPT-2). The base is frozen (in the compute dtype, as the trainer stores it) and only the
// adapters reach AdamW, the masters and the clipping; the JSON says "lora" ({"r", "alpha",
// "scaling", "target_modules", "layers"}, null without) and "trainable_params", and
// "flops_per_token" counts frozen weights as Note [MFU of a partly frozen model] does. --nf4 stores
// every frozen linear layer but the head in NF4 (QLoRA: quantization/quantized_base.h); the JSON
// says "nf4_base" ({"weights", "bytes"}).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "adapters/lora.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "core/allocator.h"
#include "core/copy.h"
#include "core/cpu_time.h"
#include "core/device_ops.h"
#include "core/factory.h"
#include "core/parallel.h"
#include "core/profiler.h"
#include "core/rng.h"
#include "kernels/cpu/gemm_engine.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/onednn_gemm.h"
#include "models/registry.h"
#include "optim/adamw.h"
#include "optim/clip_grad.h"
#include "optim/mixed_precision.h"
#include "parallel/placement.h"
#include "quantization/quantized_base.h"
#include "train/mfu.h"

using namespace trident;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// GFLOP/s of the deterministic GEMM on a square product, best of a few runs: f32, or bf16 on
// the engine this process chose (kernels/cpu/onednn_gemm.h).
template <class T>
double gemm_gflops(int64_t n) {
  std::vector<T> a(static_cast<size_t>(n * n), T(0.5f)), b(a), c(a);
  double best = 0.0;
  for (int rep = 0; rep < 4; ++rep) {
    const auto t0 = Clock::now();
    kernels::cpu::gemm<T>(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    best = std::max(best, 2.0 * static_cast<double>(n * n * n) / seconds_since(t0) / 1e9);
  }
  return best;
}

// User + system CPU seconds of every thread of the process so far. Per step, next to the wall
// time: on a machine shared with other work a step's CPU time moves much less than its wall
// time (it misses idle threads waiting on a slower one: OMP_WAIT_POLICY=PASSIVE sleeps).
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

}  // namespace

int main(int argc, char** argv) {
  models::ModelConfig cfg;  // GPT-2 124M unless told otherwise
  int64_t T = 1024, B = 4, steps = 5, warmup = 1, threads = 0;
  bool sgemm = false, gemm_rates = false;
  std::string device_name = "cpu";
  bool offload = false;
  bool profile = false;
  bool profiler_range_steps = false;
  double peak_tflops = 0.0;
  optim::PrecisionOptions precision;
  adapters::LoraOptions lora;  // r = 0: no adapters
  bool lora_targets_given = false;
  bool nf4 = false;  // the frozen base in NF4 (QLoRA)
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "train_step_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--arch") cfg.arch = next();
    else if (a == "--kv-heads") cfg.family_values["n_kv_heads"] = int64_t{std::stoll(next())};
    else if (a == "--intermediate") cfg.family_values["intermediate_size"] = int64_t{std::stoll(next())};
    else if (a == "--sliding-window") cfg.family_values["sliding_window"] = int64_t{std::stoll(next())};
    else if (a == "--experts") cfg.family_values["num_local_experts"] = int64_t{std::stoll(next())};
    else if (a == "--top-k") cfg.family_values["num_experts_per_tok"] = int64_t{std::stoll(next())};
    else if (a == "--expert-intermediate") cfg.family_values["moe_intermediate_size"] = int64_t{std::stoll(next())};
    else if (a == "--layers") cfg.n_layer = std::stoll(next());
    else if (a == "--embd") cfg.n_embd = std::stoll(next());
    else if (a == "--heads") cfg.n_head = std::stoll(next());
    else if (a == "--vocab") cfg.vocab_size = std::stoll(next());
    else if (a == "--T") T = std::stoll(next());
    else if (a == "--B") B = std::stoll(next());
    else if (a == "--steps") steps = std::stoll(next());
    else if (a == "--warmup") warmup = std::stoll(next());
    else if (a == "--threads") threads = std::stoll(next());
    else if (a == "--checkpointing") cfg.activation_checkpointing = next();
    else if (a == "--sgemm") sgemm = true;
    else if (a == "--gemm-rates") gemm_rates = true;
    else if (a == "--device") device_name = next();
    else if (a == "--offload") offload = true;
    else if (a == "--profile") profile = true;
    else if (a == "--profiler-range") profiler_range_steps = true;
    else if (a == "--peak-tflops") peak_tflops = std::stod(next());
    else if (a == "--precision") precision.dtype = next();
    else if (a == "--lora-r") lora.r = std::stoll(next());
    else if (a == "--lora-alpha") lora.alpha = std::stod(next());
    else if (a == "--lora-targets") lora.target_modules = next(), lora_targets_given = true;
    else if (a == "--nf4") nf4 = true;
    else {
      std::fprintf(stderr, "train_step_bench: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  try {
    if (threads > 0) set_num_threads(static_cast<int>(threads));
    set_flush_denormals(true);
    cfg.block_size = T;
    std::unique_ptr<models::CausalLM> model_storage;
    {
      MemoryCategoryGuard params(MemoryCategory::kParameter);
      model_storage = models::build_model(cfg);
    }
    models::CausalLM& model = *model_storage;
    std::vector<adapters::LoraLayerInfo> lora_layers;
    if (lora.enabled()) {
      if (!lora_targets_given)
        lora.target_modules = cfg.arch == "llama" ? "q_proj,k_proj,v_proj,o_proj" : "c_attn,attn.c_proj";
      lora.validate();
      MemoryCategoryGuard params(MemoryCategory::kParameter);
      lora_layers = adapters::apply_lora(model, lora);  // freezes the whole base
    }
    if (device_name != "cpu" && device_name != "cuda") {
      std::fprintf(stderr, "train_step_bench: --device must be cpu or cuda, got %s\n", device_name.c_str());
      return 2;
    }
    const Device device = device_name == "cuda" ? Device::cuda() : Device::cpu();
    model.to(device);
    model.train();
    int64_t n_params = 0, n_trainable = 0;
    std::vector<nn::NamedTensor> trainable;  // everything, or (LoRA) the adapters alone
    for (const auto& [name, p] : model.named_parameters()) {
      n_params += p.numel();
      if (!p.requires_grad()) continue;
      n_trainable += p.numel();
      trainable.emplace_back(name, p);
    }
    if (precision.mixed()) {  // frozen parameters are stored in the compute dtype, as parallelize() does
      autograd::NoGradGuard no_grad;
      MemoryCategoryGuard params(MemoryCategory::kParameter);
      for (auto& [name, p] : model.named_parameters())
        if (!p.requires_grad() && p.numel() > 0 && p.dtype() != precision.compute_dtype())
          p.set_data(core::cast(p, precision.compute_dtype()));
    }
    // --nf4: QLoRA's base, every frozen linear layer but the head in NF4 (quantization/quantized_base.h).
    std::optional<quantization::QuantizedBase> nf4_base;
    if (nf4) {
      quantization::QuantizationOptions q;
      q.base = "nf4";
      nf4_base = quantization::quantize_base(model, q, [](const std::string&) { return true; });
    }
    std::optional<optim::MasterWeights> master;
    if (precision.mixed() || offload)
      master.emplace(trainable, precision.compute_dtype(),
                     offload ? std::optional<Device>(Device::cpu()) : std::nullopt);
    const double loss_scale = precision.loss_scaling() ? 1024.0 : 1.0;
    optim::AdamWOptions opt_options;
    optim::AdamW opt(master ? master->masters() : trainable, opt_options);
    std::vector<Tensor> params;
    if (master) params = master->master_tensors();
    else
      for (const auto& named : trainable) params.push_back(named.second);
    Generator gen(1);
    std::vector<double> step_ms, step_cpu_ms, losses;
    std::optional<profiler::ProfileReport> report;
    // The peaks of the warm-up and timed steps, read before a profiled step.
    rusage ru{};
    MemoryStats mem;
    int64_t host_peak = 0;
    auto read_peaks = [&] {
      getrusage(RUSAGE_SELF, &ru);
      mem = device.is_cpu() ? host_allocator().stats() : device_allocator(device.type)->stats();
      host_peak = host_allocator().stats().in_use.peak;
    };
    // The set-up's peaks (the model built whole, then cast or quantized), and the steps' from here
    // on: "steps_allocator_peak_mib" is what training holds; "allocator_peak_mib" stays the
    // whole process's, the larger of the two.
    Allocator& measured = device.is_cpu() ? host_allocator() : *device_allocator(device.type);
    const MemoryStats setup = measured.stats();
    measured.reset_peak_stats();
    // The warm-up and timed steps, then (--profile) one more, profiled and not timed.
    for (int64_t s = 0; s < warmup + steps + (profile ? 1 : 0); ++s) {
      const bool profiled = s == warmup + steps;
      if (profiled) read_peaks();
      const Tensor idx = core::to_device(randint(0, cfg.vocab_size, {B, T}, gen), device);
      const Tensor targets = core::to_device(randint(0, cfg.vocab_size, {B, T}, gen), device);
      synchronize(device);
      if (profiler_range_steps && s == warmup) profiler_range(device, true);
      std::optional<profiler::ProfileSession> session;
      if (profiled) {
        // On a GPU the scopes would time launches: a clock that first waits for the device
        // makes each scope's time the GPU's (and the step slower: it is not timed).
        profiler::ProfilerOptions options;
        if (!device.is_cpu())
          options.clock_ns = [device] {
            synchronize(device);
            return static_cast<int64_t>(
                std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count());
          };
        session.emplace(std::move(options));
      }
      const auto t0 = Clock::now();
      const double cpu0 = process_cpu_seconds();
      double loss_value = 0.0;
      {
        MemoryCategoryGuard activations(MemoryCategory::kActivation);
        const Tensor loss = model.loss(idx, targets);
        loss_value = loss.item();
        autograd::backward(loss_scale == 1.0 ? loss : loss * loss_scale);
        if (master) master->finish_backward();
      }
      if (master && loss_scale != 1.0) master->scale_grads(1.0 / loss_scale);
      optim::clip_grad_norm_(params, opt_options.grad_clip);
      if (master) {
        master->step(opt, opt_options.lr);
        master->zero_grads();
      } else {
        opt.step(opt_options.lr);
      }
      model.zero_grad();
      synchronize(device);
      if (profiler_range_steps && s == warmup + steps - 1) profiler_range(device, false);
      const double elapsed_ms = seconds_since(t0) * 1e3;
      const double cpu_ms = (process_cpu_seconds() - cpu0) * 1e3;
      if (session) report = session->stop();
      std::fprintf(stderr, "step %lld%s: %.0f ms, loss %.4f\n", static_cast<long long>(s + 1),
                   profiled ? " (profiled, not timed)" : "", elapsed_ms, loss_value);
      if (profiled) continue;
      step_ms.push_back(elapsed_ms);
      step_cpu_ms.push_back(cpu_ms);
      losses.push_back(loss_value);
    }
    if (!profile) read_peaks();
    const std::vector<double> timed(step_ms.begin() + warmup, step_ms.end());
    const double ms = median(timed);
    nlohmann::json out = {
        {"framework", "trident"},
        {"config", {{"arch", cfg.arch}, {"n_layer", cfg.n_layer}, {"n_embd", cfg.n_embd}, {"n_head", cfg.n_head},
                    {"vocab_size", cfg.vocab_size}, {"T", T}, {"B", B},
                    {"activation_checkpointing", cfg.activation_checkpointing}}},
        {"precision", precision.dtype},
        {"threads", num_threads()},
        {"params", n_params},
        {"trainable_params", n_trainable},
        {"step_ms", step_ms},
        {"losses", losses},
        {"median_step_ms", ms},
        {"step_cpu_ms", step_cpu_ms},
        {"median_step_cpu_ms", median(std::vector<double>(step_cpu_ms.begin() + warmup, step_cpu_ms.end()))},
        {"tokens_per_s", static_cast<double>(B * T) / (ms / 1e3)},
        {"peak_rss_mib", static_cast<double>(ru.ru_maxrss) / 1024.0},
        {"allocator_peak_mib", static_cast<double>(std::max(setup.in_use.peak, mem.in_use.peak)) / (1024.0 * 1024.0)},
        {"steps_allocator_peak_mib", static_cast<double>(mem.in_use.peak) / (1024.0 * 1024.0)},
        {"setup_allocator_peak_mib", static_cast<double>(setup.in_use.peak) / (1024.0 * 1024.0)},
        {"allocator_reserved_peak_mib", static_cast<double>(mem.peak_reserved) / (1024.0 * 1024.0)},
    };
    // Each category's own peak (they peak at different moments: their sum exceeds the total's).
    for (int c = 0; c < kNumMemoryCategories; ++c) {
      const char* name = memory_category_name(static_cast<MemoryCategory>(c));
      out["allocator_peak_mib_by_category"][name] =
          static_cast<double>(std::max(setup.by_category[c].peak, mem.by_category[c].peak)) / (1024.0 * 1024.0);
      out["steps_allocator_peak_mib_by_category"][name] = static_cast<double>(mem.by_category[c].peak) / (1024.0 * 1024.0);
    }
    if (report) {
      std::fprintf(stderr, "profile of step %lld (after the timed ones, not timed):\n%s",
                   static_cast<long long>(warmup + steps + 1), report->table().c_str());
      out["profile"] = nlohmann::json::parse(report->json());
    }
    if (sgemm) out["sgemm_gflops"] = gemm_gflops<float>(2048);
    if (device.is_cpu()) {
      out["cpu_isa"] = kernels::cpu::onednn_cpu_isa();
      namespace k = kernels::cpu;
      out["bf16_gemm"] = k::gemm_engine_name(k::GemmType::kBF16, k::gemm_engine(k::GemmType::kBF16));
      out["f32_gemm"] = k::gemm_engine_name(k::GemmType::kF32, k::gemm_engine(k::GemmType::kF32));
      if (sgemm && precision.compute_dtype() == DType::kBF16) out["bf16_gemm_gflops"] = gemm_gflops<bf16>(2048);
    }
    out["device"] = device_name;
    out["profiler_range"] = profiler_range_steps;
    out["offload"] = offload;
    if (!device.is_cpu())
      out["host_allocator_peak_mib"] = static_cast<double>(host_peak) / (1024.0 * 1024.0);
    // PaLM's count: 6 N + 12 L C T FLOPs per token, N without gather-only embeddings (Note [MFU's N]).
    const int64_t palm_params = train::palm_parameter_count(model);
    double flops_per_token = train::palm_flops_per_token(palm_params, cfg, T);
    out["palm_params"] = palm_params;
    if (lora.enabled()) {
      // A frozen base: 4 or 2 FLOPs per weight and token, not 6 (Note [MFU of a partly frozen model]).
      std::vector<parallel::ParamSpec> specs;
      for (const auto& [name, p] : model.named_parameters())
        specs.push_back({name, p.shape(), model.block_of(name), parallel::Placement::replicate(), p.requires_grad()});
      const parallel::PlacementTable table = parallel::PlacementTable::build(
          specs, parallel::MeshShape{}, [](int64_t) { return 0; }, 0, precision.compute_dtype(),
          precision.compute_dtype());
      const train::PalmCounts counts = train::palm_counts(model, table);
      flops_per_token = train::palm_flops_per_token(counts, cfg, T);
      out["palm_counts"] = {{"trained", counts.trained}, {"frozen_backward", counts.frozen_backward},
                            {"frozen_forward_only", counts.frozen_forward_only},
                            {"blocks_backward", counts.blocks_backward}};
      nlohmann::json layers = nlohmann::json::array();
      for (const adapters::LoraLayerInfo& l : lora_layers) layers.push_back(l.path);
      out["lora"] = {{"r", lora.r}, {"alpha", lora.alpha}, {"scaling", lora.scaling()},
                     {"target_modules", lora.target_modules}, {"layers", layers}};
    } else {
      out["lora"] = nullptr;
    }
    if (nf4_base) {
      out["nf4_base"] = {{"weights", nf4_base->params()}, {"bytes", nf4_base->bytes()}};
    }
    out["flops_per_token"] = flops_per_token;
    const double tokens_per_s = static_cast<double>(B * T) / (ms / 1e3);
    if (gemm_rates && device.is_cpu()) {
      namespace k = kernels::cpu;
      const k::GemmRates rates =
          k::measure_gemm_rates(models::model_family(cfg.arch).gemm_shapes(cfg, B, T), {k::GemmType::kF32, k::GemmType::kBF16});
      const double ceiling = rates.ceiling_gflops(train::gemm_type_of_precision(precision.compute_dtype()));
      out["gemm_rates"] = train::gemm_rates_json(rates);
      out["gemm_rates_seconds"] = rates.seconds;
      out["gemm_ceiling_gflops"] = ceiling;
      out["mfu"] = flops_per_token * tokens_per_s / (ceiling * 1e9);
    } else if (peak_tflops > 0) {
      out["mfu"] = flops_per_token * tokens_per_s / (peak_tflops * 1e12);
      out["peak_tflops"] = peak_tflops;
    }
    std::printf("%s\n", out.dump().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_step_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
