// W8A8 GEMM benchmark: trident's int8 kernels (each path this CPU runs) and oneDNN's int8
// matmul against the fp32 GEMM the project uses (kernels/cpu/matmul.h's gemm), at GPT-2 124M's
// linear layers (K x N: qkv 768x2304, attention out 768x768, mlp up 768x3072, mlp down
// 3072x768, head 768x50257) at decode (M = 1, 8) and prefill (M = 128, 512, 2048) rows, side by
// side in one run. W8A8 times include quantizing the activations (as a layer pays it). Prints
// JSON: per shape the median and best milliseconds, GOP/s, weight GB/s (decode: each weight
// byte is read once per step) and the ratios, with the CPU, its ISA and the load average
// (the machine may be shared: ratios from one run are what to compare).
//
// Decode rows (M <= 8) rotate through copies of each weight, at least --cold-mb megabytes of each
// format (default 64, 16x a core's L2), as a decode step meets each layer's weight after the
// other layers': from L3 or memory, not from L2.
//
// Usage: int8_gemm_bench [--threads N] [--min-seconds S] [--rows 1,8,128] [--heads 0|1] [--cold-mb MB]
// (OMP_WAIT_POLICY=PASSIVE on a shared machine: spinning OpenMP threads that lose their core
// stretch every parallel region to a scheduler slice.)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/parallel.h"
#include "kernels/cpu/int8_gemm.h"
#include "kernels/cpu/int8_quantize.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/onednn_gemm.h"
#include "kernels/cpu/onednn_int8_gemm.h"

using namespace trident;
using namespace trident::kernels::cpu;
using Clock = std::chrono::steady_clock;

namespace {

struct Timing {
  double median_ms, best_ms;
};

// Calls fn until min_seconds have passed (at least 3 times, after one warm-up).
template <class Fn>
Timing time_calls(double min_seconds, const Fn& fn) {
  fn();
  std::vector<double> ms;
  const auto start = Clock::now();
  while (ms.size() < 3 || std::chrono::duration<double>(Clock::now() - start).count() < min_seconds) {
    const auto t0 = Clock::now();
    fn();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms.front()};
}

std::string first_line_of(const char* path, const char* key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (key == nullptr || line.rfind(key, 0) == 0) return key == nullptr ? line : line.substr(line.find(':') + 2);
  return "?";
}

std::vector<int64_t> parse_list(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(std::stoll(item));
  return out;
}

nlohmann::json timing_json(const Timing& t, double ops, double weight_bytes) {
  return {{"median_ms", t.median_ms},
          {"best_ms", t.best_ms},
          {"gops", ops / (t.median_ms * 1e6)},
          {"weight_gb_per_s", weight_bytes / (t.median_ms * 1e6)}};
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2;
  double min_seconds = 0.3;
  std::vector<int64_t> rows = {1, 8, 128, 512, 2048};
  bool heads = true;
  double cold_mb = 64;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) threads = std::stoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--min-seconds") && i + 1 < argc) min_seconds = std::stod(argv[++i]);
    else if (!std::strcmp(argv[i], "--rows") && i + 1 < argc) rows = parse_list(argv[++i]);
    else if (!std::strcmp(argv[i], "--heads") && i + 1 < argc) heads = std::stoi(argv[++i]) != 0;
    else if (!std::strcmp(argv[i], "--cold-mb") && i + 1 < argc) cold_mb = std::stod(argv[++i]);
  }
  set_num_threads(threads);
  struct Layer {
    const char* name;
    int64_t K, N;
  };
  std::vector<Layer> layers = {{"qkv", 768, 2304}, {"attn_out", 768, 768}, {"mlp_up", 768, 3072}, {"mlp_down", 3072, 768}};
  if (heads) layers.push_back({"lm_head", 768, 50257});
  std::vector<Int8Isa> paths;
  for (Int8Isa isa : {Int8Isa::kAvx512Vnni, Int8Isa::kAvxVnni, Int8Isa::kAvx2})
    if (int8_isa_supported(isa)) paths.push_back(isa);

  nlohmann::json out;
  out["bench"] = "int8_gemm";
  out["cpu"] = first_line_of("/proc/cpuinfo", "model name");
  out["onednn_isa"] = onednn_cpu_isa();
  out["int8_paths"] = int8_isa_supported_names();
  out["threads"] = threads;
  out["cold_mb"] = cold_mb;
  const char* wait_policy = std::getenv("OMP_WAIT_POLICY");
  out["omp_wait_policy"] = wait_policy != nullptr ? wait_policy : "";
  out["load_average_before"] = first_line_of("/proc/loadavg", nullptr);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  nlohmann::json results = nlohmann::json::array();
  for (const Layer& layer : layers) {
    const int64_t K = layer.K, N = layer.N;
    // Copies of each format for the decode rows' rotation (the first copy for prefill).
    const auto copies_of = [&](double bytes) { return std::max<int64_t>(1, static_cast<int64_t>(cold_mb * 1e6 / bytes) + 1); };
    const int64_t n32 = copies_of(4.0 * K * N), n8 = copies_of(double(K) * N);
    std::vector<std::vector<float>> w32(n32, std::vector<float>(K * N));  // (K, N): GPT-2's Conv1D layout
    for (float& v : w32[0]) v = 0.02f * normal(rng);
    for (int64_t c = 1; c < n32; ++c) w32[c] = w32[0];
    // Per-channel int8 codes of W^T (N, K).
    std::vector<float> wt(N * K);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) wt[n * K + k] = w32[0][k * N + n];
    std::vector<int8_t> wq(N * K);
    std::vector<float> ws(N);
    quantize_rows_int8(wt.data(), N, K, K, wq.data(), K, ws.data());
    wt = {};
    std::vector<std::unique_ptr<Int8PackedWeights>> packed;
    std::vector<std::unique_ptr<OnednnInt8Weights>> onednn;
    for (int64_t c = 0; c < n8; ++c) {
      packed.push_back(std::make_unique<Int8PackedWeights>(wq.data(), N, K, K, ws.data()));
      onednn.push_back(std::make_unique<OnednnInt8Weights>(wq.data(), N, K, K, ws.data()));
    }
    for (int64_t M : rows) {
      std::vector<float> x(M * K), y(M * N), bias(N, 0.5f), a_scale(M);
      for (float& v : x) v = normal(rng);
      std::vector<int8_t> xq(M * K);
      const double ops = 2.0 * M * N * K;
      const bool rotate = M <= 8;
      int64_t i32 = 0, i8 = 0;  // the next copy of each format
      const auto next32 = [&]() -> const float* { return w32[rotate ? i32++ % n32 : 0].data(); };
      const auto next8 = [&]() -> int64_t { return rotate ? i8++ % n8 : 0; };
      nlohmann::json r = {{"layer", layer.name}, {"M", M}, {"K", K}, {"N", N}, {"weights_rotated", rotate}};
      const Timing fp32 = time_calls(min_seconds, [&] {
        gemm<float>(false, false, M, N, K, 1.0f, x.data(), K, next32(), N, 0.0f, y.data(), N);
      });
      r["fp32_gemm"] = timing_json(fp32, ops, 4.0 * N * K);
      const Timing quantize = time_calls(min_seconds, [&] {
        quantize_rows_int8(x.data(), M, K, K, xq.data(), K, a_scale.data());
      });
      r["quantize_ms"] = quantize.median_ms;
      double best_ours = 1e30;
      for (Int8Isa isa : paths) {
        if (!rotate && isa != paths.front()) continue;  // prefill: the widest path only (the others are slower)
        const Timing t = time_calls(min_seconds, [&] {
          quantize_rows_int8(x.data(), M, K, K, xq.data(), K, a_scale.data());
          int8_gemm(M, xq.data(), K, a_scale.data(), *packed[next8()], bias.data(), y.data(), N, isa);
        });
        r[std::string("trident_") + int8_isa_name(isa)] = timing_json(t, ops, double(N) * K);
        best_ours = std::min(best_ours, t.median_ms);
      }
      const Timing dnnl = time_calls(min_seconds, [&] {
        quantize_rows_int8(x.data(), M, K, K, xq.data(), K, a_scale.data());
        onednn_int8_gemm(M, xq.data(), K, a_scale.data(), *onednn[next8()], bias.data(), y.data(), N);
      });
      r["onednn_int8"] = timing_json(dnnl, ops, double(N) * K);
      r["speedup_trident_vs_fp32"] = fp32.median_ms / best_ours;
      r["speedup_onednn_vs_fp32"] = fp32.median_ms / dnnl.median_ms;
      r["trident_over_onednn_time"] = best_ours / dnnl.median_ms;
      r["faster"] = best_ours <= dnnl.median_ms ? "trident" : "onednn";
      std::fprintf(stderr, "%-8s M=%-5lld fp32 %8.3f ms  trident %8.3f ms  onednn %8.3f ms\n", layer.name,
                   static_cast<long long>(M), fp32.median_ms, best_ours, dnnl.median_ms);
      results.push_back(r);
    }
  }
  out["results"] = results;
  out["load_average_after"] = first_line_of("/proc/loadavg", nullptr);
  std::printf("%s\n", out.dump(2).c_str());
}
