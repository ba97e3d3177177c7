// GEMM rates per engine and dtype at GPT-2 training steps' shapes (kernels/cpu/gemm_rates.h):
// trident's deterministic blocked GEMM on OpenBLAS and oneDNN, bf16 on oneDNN or widened to
// f32, and the libraries' own multi-threaded GEMMs as the reference ceiling. Prints JSON:
// per config, every engine's FLOP-weighted GFLOP/s, its slowest and fastest shape, the
// per-shape rates, and each dtype's ceiling. `trident gemm-rates` does the same for one
// training config.
//
// Usage: gemm_rates_bench [--threads N] [--seconds-per-shape S] [--configs tiny,small,124M,llama125M]
//                         [--prefill B,T]
//   --prefill B,T: a prefill's products instead of a step's: the blocks' forward GEMMs of B
//   prompts of T tokens (the head runs on each prompt's last token only, so it is left out).
//   The threaded references are then the ceiling a prefill's GEMMs could reach.
//   tiny: L4 C256 T256 B8; small: L6 C512 T512 B4; 124M: L12 C768 T1024 B4 (GPT-2, V 50257);
//   llama125M: L12 C768 12 heads, 4 kv heads, SwiGLU 2048, V 32000 untied, T1024 B4 (the
//   config of bench/train_speed_compare.py)
#include <cstdio>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/parallel.h"
#include "kernels/cpu/gemm_rates.h"
#include "kernels/cpu/onednn_gemm.h"
#include "models/registry.h"
#include "train/mfu.h"

using namespace trident;
namespace k = kernels::cpu;

namespace {

struct Config {
  const char* name;
  int64_t L, C, T, B;
  const char* arch = "gpt2";
  int64_t V = 50257, kv_heads = 0, intermediate = 0;
};

}  // namespace

int main(int argc, char** argv) {
  int threads = 0;
  std::string which = "tiny,small,124M";
  k::GemmRateOptions options;
  int64_t prefill_b = 0, prefill_t = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "gemm_rates_bench: %s needs a value\n", a.c_str());
      return 2;
    }
    if (a == "--threads") threads = std::stoi(argv[++i]);
    else if (a == "--seconds-per-shape") options.seconds_per_shape = std::stod(argv[++i]);
    else if (a == "--configs") which = argv[++i];
    else if (a == "--prefill") {
      const std::string v = argv[++i];
      const auto comma = v.find(',');
      if (comma == std::string::npos || (prefill_b = std::stoll(v.substr(0, comma))) <= 0 ||
          (prefill_t = std::stoll(v.substr(comma + 1))) <= 0) {
        std::fprintf(stderr, "gemm_rates_bench: --prefill %s: expected B,T with both positive (8,128)\n", v.c_str());
        return 2;
      }
    }    else {
      std::fprintf(stderr, "gemm_rates_bench: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  try {
    if (threads > 0) set_num_threads(threads);
    const Config configs[] = {{"tiny", 4, 256, 256, 8}, {"small", 6, 512, 512, 4}, {"124M", 12, 768, 1024, 4},
                              {"llama125M", 12, 768, 1024, 4, "llama", 32000, 4, 2048}};
    nlohmann::ordered_json out = {{"benchmark", "gemm_rates"}, {"threads", num_threads()},
                                  {"cpu_isa", k::onednn_cpu_isa()}, {"seconds_per_shape", options.seconds_per_shape}};
    std::stringstream list(which);
    for (std::string name; std::getline(list, name, ',');) {
      const Config* c = nullptr;
      for (const Config& x : configs)
        if (name == x.name) c = &x;
      if (c == nullptr) {
        std::fprintf(stderr, "gemm_rates_bench: unknown config %s (tiny, small, 124M, llama125M)\n", name.c_str());
        return 2;
      }
      models::ModelConfig model;
      model.arch = c->arch;
      model.n_layer = c->L, model.n_embd = c->C, model.n_head = c->C / 64, model.block_size = c->T;
      model.vocab_size = c->V;
      if (c->kv_heads > 0) model.family_values["n_kv_heads"] = c->kv_heads;
      if (c->intermediate > 0) model.family_values["intermediate_size"] = c->intermediate;
      const int64_t B = prefill_b > 0 ? prefill_b : c->B, T = prefill_t > 0 ? prefill_t : c->T;
      std::vector<k::GemmShape> shapes = models::model_family(c->arch).gemm_shapes(model, B, T);
      if (prefill_b > 0)
        std::erase_if(shapes, [](const k::GemmShape& s) {
          return !s.name.ends_with(" forward") || s.name.starts_with("lm_head");
        });
      const k::GemmRates rates = k::measure_gemm_rates(shapes, {k::GemmType::kF32, k::GemmType::kBF16}, options);
      nlohmann::ordered_json r = {
          {"config", {{"arch", c->arch}, {"n_layer", c->L}, {"n_embd", c->C}, {"vocab_size", c->V}, {"T", T},
                      {"B", B}, {"prefill", prefill_b > 0}}},
          {"seconds", rates.seconds},
          {"gemm_ceiling_gflops", {{"f32", rates.ceiling_gflops(k::GemmType::kF32)},
                                   {"bf16", rates.ceiling_gflops(k::GemmType::kBF16)}}},
          {"gemm_rates", train::gemm_rates_json(rates)}};
      out["configs"][c->name] = r;
      std::fprintf(stderr, "%s (%.1f s):\n%s", c->name, rates.seconds, train::gemm_rates_table(rates).c_str());
    }
    std::printf("%s\n", out.dump(2).c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gemm_rates_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
