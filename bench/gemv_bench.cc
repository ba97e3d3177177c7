// Few-row products (a decode step's: M = 1..8 rows against a weight read once), trident's
// bandwidth-bound kernels (kernels/cpu/gemv.h, what gemm takes for such products) against the
// GEMM engine the process would otherwise use (oneDNN's f32 matmul on AVX-512, else OpenBLAS)
// and OpenBLAS's own sgemv (M = 1), at the linear layers' shapes of GPT-2 124M (Conv1D weights,
// x W) and the 125M LLaMA (x W^T), timed in turns in one process. Each timed call reads another
// copy of the weight (copies of about 1 GiB in all, cycled) so that weights come from memory,
// not the last level cache, as a decode step's do. Prints JSON: per shape and M, each side's
// microseconds and GB/s of weight read, the ratios, and the machine's read bandwidth measured in
// the same process (bench/memory_bandwidth.h).
//
// Usage: gemv_bench [--threads T] [--reps R] [--precision fp32|bf16] [--rows 1,8 (the M values)]
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/parallel.h"
#include "kernels/cpu/gemm_engine.h"
#include "kernels/cpu/gemv.h"
#include "kernels/cpu/matmul.h"
#include "memory_bandwidth.h"

using namespace trident;
using Clock = std::chrono::steady_clock;

namespace {

struct Shape {
  const char* name;
  bool trans_b;  // x W^T with W (N, K); else x W with W (K, N)
  int64_t K, N;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class T>
nlohmann::json run_shape(const Shape& s, int64_t M, int reps) {
  const int64_t weight = s.K * s.N;
  const int64_t copies = std::max<int64_t>(2, (int64_t{1} << 30) / (weight * static_cast<int64_t>(sizeof(T))));
  std::vector<std::vector<T>> w(static_cast<size_t>(copies));
  for (int64_t c = 0; c < copies; ++c) {
    w[static_cast<size_t>(c)].resize(static_cast<size_t>(weight));
    for (int64_t i = 0; i < weight; ++i) w[static_cast<size_t>(c)][static_cast<size_t>(i)] = T(static_cast<float>((i * 7 + c) % 13) * 0.01f - 0.06f);
  }
  std::vector<T> a(static_cast<size_t>(M * s.K), T(0.5f)), c(static_cast<size_t>(M * s.N));
  const int64_t ldb = s.trans_b ? s.K : s.N;
  const kernels::cpu::GemmEngines engines = kernels::cpu::gemm_engines();
  int64_t next = 0;
  auto time = [&](auto&& product) {
    const T* b = w[static_cast<size_t>(next++ % copies)].data();
    const auto t0 = Clock::now();
    product(b);
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  auto small = [&](const T* b) {
    kernels::cpu::gemm<T>(false, s.trans_b, M, s.N, s.K, 1.0f, a.data(), s.K, b, ldb, 0.0f, c.data(), s.N);
  };
  auto engine = [&](const T* b) {
    kernels::cpu::gemm_on<T>(engines, false, s.trans_b, M, s.N, s.K, 1.0f, a.data(), s.K, b, ldb, 0.0f, c.data(), s.N);
  };
  auto openblas = [&](const T* b) {
    if constexpr (std::is_same_v<T, float>)
      cblas_sgemv(CblasRowMajor, s.trans_b ? CblasNoTrans : CblasTrans, s.trans_b ? s.N : s.K, s.trans_b ? s.K : s.N,
                  1.0f, b, ldb, a.data(), 1, 0.0f, c.data(), 1);
  };
  const bool with_blas = std::is_same_v<T, float> && M == 1;
  for (int64_t i = 0; i < copies; ++i) time(small), time(engine);  // warm-up: page faults, engine caches
  std::vector<double> ts, te, tb;
  for (int r = 0; r < reps; ++r)
    for (int64_t i = 0; i < copies; ++i) {
      ts.push_back(time(small));
      te.push_back(time(engine));
      if (with_blas) tb.push_back(time(openblas));
    }
  const double bytes = static_cast<double>(weight) * sizeof(T);
  nlohmann::json out = {{"shape", s.name}, {"M", M}, {"K", s.K}, {"N", s.N}, {"weight_layout", s.trans_b ? "(N,K): x W^T" : "(K,N): x W"},
                        {"trident_us", median(ts) * 1e6}, {"trident_gb_per_s", bytes / median(ts) / 1e9},
                        {"engine_us", median(te) * 1e6}, {"engine_gb_per_s", bytes / median(te) / 1e9},
                        {"engine_over_trident", median(te) / median(ts)}};
  if (with_blas) {
    out["openblas_sgemv_us"] = median(tb) * 1e6;
    out["openblas_sgemv_gb_per_s"] = bytes / median(tb) / 1e9;
    out["openblas_sgemv_over_trident"] = median(tb) / median(ts);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, reps = 3;
  std::string precision = "fp32";
  std::vector<int64_t> rows = {1, 8};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--rows" && i + 1 < argc) {
      rows.clear();
      std::stringstream list(argv[++i]);
      for (std::string item; std::getline(list, item, ',');) {
        const int64_t m = std::atoll(item.c_str());
        if (m < 1 || m > kernels::cpu::kGemvMaxRows) {
          std::fprintf(stderr, "gemv_bench: --rows %s: allowed: 1 to %lld\n", item.c_str(),
                       static_cast<long long>(kernels::cpu::kGemvMaxRows));
          return 2;
        }
        rows.push_back(m);
      }
    } else if (arg == "--threads" && i + 1 < argc) threads = std::stoi(argv[++i]);
    else if (arg == "--reps" && i + 1 < argc) reps = std::stoi(argv[++i]);
    else if (arg == "--precision" && i + 1 < argc) precision = argv[++i];
    else {
      std::fprintf(stderr, "usage: gemv_bench [--threads T] [--reps R] [--precision fp32|bf16] [--rows 1,8]\n");
      return 2;
    }
  }
  if (precision != "fp32" && precision != "bf16") {
    std::fprintf(stderr, "gemv_bench: --precision %s: allowed: fp32, bf16\n", precision.c_str());
    return 2;
  }
  set_num_threads(threads);
  openblas_set_num_threads(threads);
  const Shape shapes[] = {
      {"gpt2 c_attn", false, 768, 2304}, {"gpt2 attn c_proj", false, 768, 768}, {"gpt2 c_fc", false, 768, 3072},
      {"gpt2 mlp c_proj", false, 3072, 768}, {"gpt2 lm_head (tied wte)", true, 768, 50257},
      {"llama q_proj", true, 768, 768}, {"llama k_proj", true, 768, 256}, {"llama gate_proj", true, 768, 2048},
      {"llama down_proj", true, 2048, 768}, {"llama lm_head", true, 768, 32000},
  };
  const kernels::cpu::GemmType type = precision == "fp32" ? kernels::cpu::GemmType::kF32 : kernels::cpu::GemmType::kBF16;
  nlohmann::json results = nlohmann::json::array();
  for (const Shape& s : shapes)
    for (int64_t M : rows)
      results.push_back(precision == "fp32" ? run_shape<float>(s, M, reps) : run_shape<bf16>(s, M, reps));
  const nlohmann::json out = {{"bench", "gemv"}, {"precision", precision}, {"threads", num_threads()},
                              {"engine", kernels::cpu::gemm_engine_name(type, kernels::cpu::gemm_engines().of(type))},
                              {"memory_read_gb_per_s", bench::memory_read_gb_per_s()}, {"results", results}};
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
