// Matmul microbenchmark: trident's deterministic blocked GEMM (ops::matmul, and the
// transposed-operand forms backward uses) against calling OpenBLAS directly with its own
// threading, at GPT-2 124M shapes (M = B*T = 4096 tokens). Prints JSON.
//
// Usage: matmul_bench [--threads N] [--reps R]
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/factory.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "core/views.h"
#include "ops/linalg.h"

using namespace trident;
using Clock = std::chrono::steady_clock;

namespace {

template <class Fn>
double median_seconds(int reps, const Fn& fn) {
  fn();  // warm-up: allocator cache, BLAS buffers, page faults
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto start = Clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Case {
  const char* name;  // what the product is in a GPT-2 step
  int64_t M, K, N;
  bool trans_a;      // op(A) = A^T: A is stored (K, M)
};

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, reps = 5;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) threads = std::stoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::stoi(argv[++i]);
  }
  set_num_threads(threads);
  const Case cases[] = {
      {"qkv projection 4096x768x2304", 4096, 768, 2304, false},
      {"mlp up 4096x768x3072", 4096, 768, 3072, false},
      {"mlp down 4096x3072x768", 4096, 3072, 768, false},
      {"lm head 4096x768x50257", 4096, 768, 50257, false},
      {"weight grad (A^T) 768x4096x3072", 768, 4096, 3072, true},
  };
  nlohmann::json out;
  out["benchmark"] = "matmul";
  out["threads"] = threads;
  out["reps"] = reps;
  out["note"] = "GFLOP/s = 2*M*K*N / median time; blas = cblas_sgemm with OpenBLAS's own threading";
  Generator gen(0);
  for (const Case& c : cases) {
    Tensor a = c.trans_a ? views::transpose(randn({c.K, c.M}, gen), 0, 1) : randn({c.M, c.K}, gen);
    Tensor b = randn({c.K, c.N}, gen);
    Tensor dst = empty({c.M, c.N});
    const double flops = 2.0 * static_cast<double>(c.M) * static_cast<double>(c.K) * static_cast<double>(c.N);
    const int r = c.N > 10000 ? std::max(1, reps / 2) : reps;
    const double t_trident = median_seconds(r, [&] { Tensor y = ops::matmul(a, b); });
    const float* pa = a.data_ptr<float>();
    const double t_blas = median_seconds(r, [&] {
      cblas_sgemm(CblasRowMajor, c.trans_a ? CblasTrans : CblasNoTrans, CblasNoTrans, c.M, c.N, c.K, 1.0f,
                  pa, c.trans_a ? c.M : c.K, b.data_ptr<float>(), c.N, 0.0f, dst.data_ptr<float>(), c.N);
    });
    out["results"].push_back({{"shape", c.name},
                              {"M", c.M},
                              {"K", c.K},
                              {"N", c.N},
                              {"trident_gflops", flops / t_trident / 1e9},
                              {"blas_gflops", flops / t_blas / 1e9},
                              {"trident_over_blas", t_blas / t_trident}});
  }
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
