// Decode's product with a quantized weight, alone: y (M, out) = x (M, in) W^T for GPT-2 124M's
// block shapes, W in Q8_0 / Q4_0 (the fused kernel, x quantized to Q8_0 in each product, each
// path this CPU has, 1 thread and the process's threads) against the fp32 product
// (kernels/cpu/matmul.h's GEMM, the fp32 model's).
// Each case cycles through enough copies of its weight to fill 256 MB (decode streams the
// weights from memory; one copy would stay in the caches). Reports as JSON each case's time per
// product and the weight bytes read per second.
//
// With M > 8 (prefill) the quantized cases run the integer GEMM (kernels/cpu/ggml_block_gemm.h)
// and each case also reports G multiply-adds per second; --hot 1 keeps one copy of each weight
// (in the caches: the kernel's arithmetic alone).
//
// Usage: quantized_matvec_bench [--M M] [--reps R] [--threads T] [--hot 0|1]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/copy.h"
#include "core/factory.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "kernels/cpu/ggml_block_gemm.h"
#include "kernels/cpu/ggml_block_matvec.h"
#include "kernels/cpu/matmul.h"
#include "quantization/ggml_weight.h"

using namespace trident;
using Clock = std::chrono::steady_clock;

namespace {

// The median seconds of `reps` calls of fn (after one warm-up).
template <class Fn>
double time_of(int64_t reps, const Fn& fn) {
  fn();
  std::vector<double> t;
  for (int64_t r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int64_t M = 1, reps = 200, threads = 0, hot = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--M") M = std::stoll(argv[i + 1]);
    else if (a == "--reps") reps = std::stoll(argv[i + 1]);
    else if (a == "--threads") threads = std::stoll(argv[i + 1]);
    else if (a == "--hot") hot = std::stoll(argv[i + 1]);
    else {
      std::fprintf(stderr, "quantized_matvec_bench: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (threads > 0) set_num_threads(static_cast<int>(threads));
  const int all = num_threads();
  nlohmann::json out = {{"M", M}, {"threads", all}, {"isa", kernels::cpu::matvec_isa_name(kernels::cpu::ggml_matvec_isa())},
                        {"cases", nlohmann::json::array()}};
  Generator gen(1);
  // (out, in) of GPT-2 124M's c_attn, c_fc, mlp.c_proj (as (out, in) matrices).
  for (const auto& [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{2304, 768}, {3072, 768}, {768, 3072}}) {
    const Tensor w = randn({rows, cols}, gen), x = randn({M, cols}, gen);
    const int64_t copies = hot ? 1 : std::max<int64_t>(1, (int64_t{256} << 20) / (4 * rows * cols));
    std::vector<Tensor> ws;
    for (int64_t c = 0; c < copies; ++c) ws.push_back(core::clone(w));
    int64_t next = 0;
    std::vector<float> y(static_cast<size_t>(M * rows));
    const float* xp = x.data_ptr<float>();
    auto add = [&](const std::string& name, int nthreads, double bytes, double s) {
      out["cases"].push_back({{"shape", {rows, cols}}, {"kernel", name}, {"threads", nthreads}, {"us", s * 1e6},
                              {"weight_gb_per_s", bytes / s / 1e9},
                              {"g_multiply_adds_per_s", static_cast<double>(M * rows * cols) / s / 1e9}});
    };
    for (const int t : {1, all}) {
      set_num_threads(t);
      const double s = time_of(reps, [&] {
        const Tensor& wc = ws[static_cast<size_t>(next++ % copies)];
        kernels::cpu::gemm<float>(false, true, M, rows, cols, 1.0f, xp, cols, wc.data_ptr<float>(), cols, 0.0f, y.data(), rows);
      });
      add("fp32 gemm", t, 4.0 * rows * cols, s);
      for (const auto type : {kernels::cpu::GgmlBlockType::kQ8_0, kernels::cpu::GgmlBlockType::kQ4_0}) {
        std::vector<quantization::GgmlWeight> qs;
        for (int64_t c = 0; c < copies; ++c) qs.push_back(quantization::GgmlWeight::quantize(type, w));
        for (const auto isa : {kernels::cpu::MatvecIsa::kAvx512, kernels::cpu::MatvecIsa::kAvx2}) {
          if (!kernels::cpu::ggml_matvec_supports(isa)) continue;
          const double sq = time_of(reps, [&] {
            const quantization::GgmlWeight& q = qs[static_cast<size_t>(next++ % copies)];
            const kernels::cpu::GgmlQ8Activations xq(type, xp, M, cols);  // per product, as a layer pays it
            if (M > kernels::cpu::kGgmlMatvecMaxRows) {
              kernels::cpu::ggml_block_gemm(isa, xq, q.panels(), y.data(), rows);
              return;
            }
            const kernels::cpu::GgmlPanels p = q.panels();  // split as GgmlWeight::fused_product splits it
            parallel_for(0, p.panels(), std::max<int64_t>(1, 65536 / (cols * kernels::cpu::kGgmlPanelRows)),
                         [&](int64_t p0, int64_t p1) { kernels::cpu::ggml_block_matvec(isa, xq, p, p0, p1, y.data(), rows); });
          });
          add(std::string(kernels::cpu::ggml_block_type_name(type)) + " " + kernels::cpu::matvec_isa_name(isa), t,
              static_cast<double>(qs.front().bytes()), sq);
        }
      }
    }
    set_num_threads(all);
  }
  std::printf("%s\n", out.dump(1).c_str());
  return 0;
}
