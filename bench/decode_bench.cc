// Decoding benchmark: generation with the KV cache (infer/engine.h) of a randomly initialized
// model, GPT-2 124M by default, --arch llama for a LLaMA shape: B requests of P prompt tokens,
// N new tokens each, greedy. Reports as JSON the time to the first token (every request's
// prefill, median of the repetitions), decode tokens/s (the steps after the first token, all B
// rows together) and the bytes a decode step reads (weights and the cache) per second, against
// which the machine's memory bandwidth is the ceiling: measured in the same process with the
// same threads (bench/memory_bandwidth.h), and the fraction of it decoding reaches (issue #49:
// >= 0.7 at batch 1). --scheme int8|int4|nf4 quantizes the linear layers as `trident quantize`
// does (quantization/quantize_layers.h: by default the scheme's own choice of the LM head, in Q8_0
// for int8 as llama.cpp's Q8_0 files, fp32 for the others; --skip says otherwise; embeddings stay fp32), and the bytes
// a step reads count the quantized weights' bytes. --profile prints one profiled run's table
// (not timed). --checkpoint DIR runs a saved model instead (a checkpoint, a Hugging Face directory
// or a quantized directory, as `trident sample` reads them), so that another tool can run the
// same weights (bench/llama_cpp_compare.py: the same checkpoint exported as GGUF); a quantized
// directory's step bytes are its model.safetensors' size.
//
// Usage: decode_bench [--checkpoint DIR]
//          [--arch gpt2|llama [--kv-heads K] [--intermediate I]] [--layers L] [--embd C]
//          [--heads NH] [--vocab V] [--B B] [--prompt P] [--tokens N] [--reps R] [--threads T]
//          [--precision fp32|bf16] [--scheme none|int8|int4|nf4|w8a8] [--skip LAYERS] [--profile]
//          [--decode-threads D] (the decode steps' threads: Note [Decode threads] in infer/engine.h)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "autograd/grad_mode.h"
#include "core/copy.h"
#include "core/cpu_time.h"
#include "core/parallel.h"
#include "core/profiler.h"
#include "infer/engine.h"
#include "loading/model_source.h"
#include "memory_bandwidth.h"
#include "models/registry.h"
#include "quantization/quantize_layers.h"
#include "quantization/scheme.h"

using namespace trident;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  models::ModelConfig cfg;  // GPT-2 124M unless told otherwise
  int64_t B = 1, prompt = 128, tokens = 64, reps = 3, threads = 0;
  std::string precision = "fp32", scheme = "none";
  std::optional<std::string> skip;  // layers left in fp32, as trident quantize's --skip ("": none; unset: the scheme's default)
  bool profile = false;
  std::optional<std::string> checkpoint;
  int64_t decode_threads = 0;  // EngineOptions::decode_threads (0: --threads)
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "decode_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--arch") cfg.arch = next();
    else if (a == "--kv-heads") cfg.family_values["n_kv_heads"] = int64_t{std::stoll(next())};
    else if (a == "--intermediate") cfg.family_values["intermediate_size"] = int64_t{std::stoll(next())};
    else if (a == "--layers") cfg.n_layer = std::stoll(next());
    else if (a == "--embd") cfg.n_embd = std::stoll(next());
    else if (a == "--heads") cfg.n_head = std::stoll(next());
    else if (a == "--vocab") cfg.vocab_size = std::stoll(next());
    else if (a == "--B") B = std::stoll(next());
    else if (a == "--prompt") prompt = std::stoll(next());
    else if (a == "--tokens") tokens = std::stoll(next());
    else if (a == "--reps") reps = std::stoll(next());
    else if (a == "--threads") threads = std::stoll(next());
    else if (a == "--precision") precision = next();
    else if (a == "--scheme") scheme = next();
    else if (a == "--skip") skip = next();
    else if (a == "--profile") profile = true;
    else if (a == "--checkpoint") checkpoint = next();
    else if (a == "--decode-threads") decode_threads = std::stoll(next());
    else {
      std::fprintf(stderr, "decode_bench: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  try {
    if (threads > 0) set_num_threads(static_cast<int>(threads));
    set_flush_denormals(true);
    std::unique_ptr<models::CausalLM> model;
    int64_t stored_bytes = 0;  // a quantized directory's weights, as stored
    if (checkpoint) {
      auto src = loading::resolve_model_source(*checkpoint);
      if (!src.is_ok()) throw std::runtime_error(src.status().message());
      cfg = src.value().cfg.model;
      if (prompt + tokens > cfg.block_size)
        throw std::runtime_error("--prompt + --tokens = " + std::to_string(prompt + tokens) + " is more than the model's " +
                                 std::to_string(cfg.block_size) + " positions");
      if (src.value().quantized) {
        if (scheme != "none") throw std::runtime_error("--scheme " + scheme + ": " + *checkpoint + " is quantized already");
        stored_bytes = static_cast<int64_t>(std::filesystem::file_size(*checkpoint + "/model.safetensors"));
      }
      auto loaded = loading::load_model(src.value(), "");
      if (!loaded.is_ok()) throw std::runtime_error(loaded.status().message());
      model = std::move(loaded.value());
    } else {
      cfg.block_size = std::max<int64_t>(1024, prompt + tokens);
      model = models::build_model(cfg);
    }
    if (precision == "bf16") {
      autograd::NoGradGuard no_grad;
      for (auto& [name, p] : model->named_parameters()) p.set_data(core::cast(p, DType::kBF16));
    } else if (precision != "fp32") {
      std::fprintf(stderr, "decode_bench: --precision %s: allowed: fp32, bf16\n", precision.c_str());
      return 2;
    }
    model->eval();
    int64_t weight_bytes = 0;
    for (const auto& [name, p] : model->named_parameters()) weight_bytes += p.numel() * static_cast<int64_t>(element_size(p.dtype()));
    if (stored_bytes > 0) weight_bytes = stored_bytes;
    if (scheme != "none") {
      const quantization::QuantScheme* s = quantization::find_quant_scheme(scheme);
      if (s == nullptr) {
        std::fprintf(stderr, "decode_bench: --scheme %s: allowed: none, %s\n", scheme.c_str(),
                     quantization::quant_scheme_names().c_str());
        return 2;
      }
      for (const auto& l : quantization::quantize_layers(*model, *s, skip.value_or(s->default_skip), "--skip"))
        weight_bytes += l.weight->bytes() - l.weight->numel() * static_cast<int64_t>(element_size(l.weight->dtype()));
    }
    std::vector<infer::GenerationRequest> requests(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < prompt; ++t)
        requests[static_cast<size_t>(b)].prompt.push_back((b * 7919 + t * 104729) % cfg.vocab_size);
    infer::Engine engine(*model, {.max_batch = B, .capacity = prompt + tokens, .decode_threads = decode_threads});
    auto run = [&](int64_t n) {
      for (auto& r : requests) r.max_tokens = n;
      const auto t0 = Clock::now();
      engine.generate(requests);
      return seconds_since(t0);
    };
    run(2);  // warm-up
    std::vector<double> first, total;
    for (int64_t r = 0; r < reps; ++r) {
      first.push_back(run(1));
      total.push_back(run(tokens));
    }
    const double ttft = median(first), decode = median(total) - ttft;
    const double steps = static_cast<double>(tokens - 1);
    // A decode step reads every weight once and each row's cached keys and values (on average
    // half-way through the new tokens).
    const auto [kv_heads, head_size] = model->kv_cache_heads();
    const double cache_bytes = 2.0 * static_cast<double>(cfg.n_layer * kv_heads * head_size) *
                               static_cast<double>(element_size(model->parameters().front().dtype())) *
                               static_cast<double>(B) * (static_cast<double>(prompt) + steps / 2);
    if (profile) {
      profiler::ProfileSession session;
      run(tokens);
      std::fprintf(stderr, "profile of one run (not timed):\n%s", session.stop().table().c_str());
    }
    const double decode_gb_per_s = (static_cast<double>(weight_bytes) + cache_bytes) * steps / decode / 1e9;
    const double memory_gb_per_s = bench::memory_read_gb_per_s();
    const nlohmann::json out = {
        {"framework", "trident"},
        {"checkpoint", checkpoint.value_or("")},
        {"config", {{"arch", cfg.arch}, {"n_layer", cfg.n_layer}, {"n_embd", cfg.n_embd}, {"n_head", cfg.n_head},
                    {"kv_heads", kv_heads}, {"vocab_size", cfg.vocab_size}}},
        {"precision", precision},
        {"scheme", scheme},
        {"threads", num_threads()},
        {"decode_threads", decode_threads > 0 ? decode_threads : num_threads()},
        {"B", B},
        {"prompt_tokens", prompt},
        {"new_tokens", tokens},
        {"ttft_ms", ttft * 1e3},
        {"decode_tokens_per_s", static_cast<double>(B) * steps / decode},
        {"decode_step_ms", decode / steps * 1e3},
        {"decode_gb_per_s", decode_gb_per_s},
        {"memory_read_gb_per_s", memory_gb_per_s},
        {"bandwidth_fraction", decode_gb_per_s / memory_gb_per_s},
        {"weight_bytes", weight_bytes},
        {"cache_bytes", engine.cache().bytes()},
    };
    std::printf("%s\n", out.dump(2).c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "decode_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
