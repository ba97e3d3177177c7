// Attention benchmark: trident's tiled attention (forward + backward through autograd)
// against the naive method that materializes the (B, NH, T, T) scores with BLAS, at GPT-2
// 124M's attention shape (B=4, T=1024, NH=12, HS=64, causal), f32 and bf16. Checks that the
// two agree, then reports median times, useful GFLOP/s and peak allocator memory as JSON.
//
// The naive baseline is ordinary code written here: per head, S = scale Q K^T (one GEMM over
// all T x T pairs), causal mask + softmax, O = P V; backward dV = P^T dO, dP = dO V^T,
// dS = P (dP - rowsum(P dP)), dQ = scale dS K, dK = scale dS^T Q. P and dP are (B, NH, T, T)
// tensors in the input dtype. Heads run in parallel, each GEMM single-threaded
// (kernels::cpu::gemm_serial), which is the fastest way to run many T x T products on few
// cores with trident's deterministic BLAS wrapper.
//
// Usage: attention_bench [--threads N] [--reps R] [--T T] [--window W] [--NH H] [--NKV G]
//                        [--dtype f32|bf16|both] [--no-naive] [--tokens-first]
// --tokens-first: q, k, v and the output as the models' attention blocks pass them (stored
// (B, T, heads, HS), rows a time stride apart); the naive baseline then does not run.
// --NKV: grouped-query attention (LLaMA-125M: --NH 12 --NKV 4); the naive baseline runs only
// when NKV = NH. Times are wall and process CPU time (the latter is what a loaded machine
// does not distort; with one thread it is the kernel's own time).
// --window: Mistral's sliding window on both sides (the naive one still computes all T^2 scores).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "autograd/functions.h"
#include "core/allocator.h"
#include "core/cpu_time.h"
#include "core/factory.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "kernels/cpu/matmul.h"

using namespace trident;
using Clock = std::chrono::steady_clock;

namespace {

struct Problem {
  int64_t B, NH, T, HS;
  int64_t NKV = 0;     // key/value heads (0: NH); the naive baseline runs only when NKV = NH
  int64_t window = 0;  // Mistral's sliding window (0: plain causal)
  // q, k, v stored (B, T, heads, HS) and seen through (B, heads, T, HS) views, the output
  // written tokens-first: what the models' attention blocks pass (rows a time stride apart).
  bool tokens_first = false;
  // The keys query i sees: [first_key(i), i].
  int64_t first_key(int64_t i) const { return window > 0 ? std::max<int64_t>(0, i - window + 1) : 0; }
  double scale() const { return 1.0 / std::sqrt(static_cast<double>(HS)); }
};

// The naive attention of one dtype: forward keeps P for backward, as autograd would.
template <class T>
class NaiveAttention {
 public:
  explicit NaiveAttention(const Problem& p) : p_(p) {}

  Tensor forward(const Tensor& q, const Tensor& k, const Tensor& v) {
    const int64_t T_ = p_.T, HS = p_.HS, head = T_ * HS, scores = T_ * T_;
    probs_ = empty({p_.B, p_.NH, T_, T_}, dtype_of<T>());
    Tensor out = empty({p_.B, p_.NH, T_, HS}, dtype_of<T>());
    const T *Q = q.data_ptr<T>(), *K = k.data_ptr<T>(), *V = v.data_ptr<T>();
    T *P = probs_->data_ptr<T>(), *O = out.data_ptr<T>();
    const float scale = static_cast<float>(p_.scale());
    parallel_for(0, p_.B * p_.NH, 1, [&](int64_t begin, int64_t end) {
      for (int64_t h = begin; h < end; ++h) {
        T* ph = P + h * scores;
        kernels::cpu::gemm_serial<T>(false, true, T_, T_, HS, scale, Q + h * head, HS, K + h * head, HS,
                                     0.0f, ph, T_);
        for (int64_t i = 0; i < T_; ++i) softmax_causal_row(ph + i * T_, i);
        kernels::cpu::gemm_serial<T>(false, false, T_, HS, T_, 1.0f, ph, T_, V + h * head, HS, 0.0f,
                                     O + h * head, HS);
      }
    });
    return out;
  }

  // Returns dq, dk, dv.
  std::vector<Tensor> backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v) {
    const int64_t T_ = p_.T, HS = p_.HS, head = T_ * HS, scores = T_ * T_;
    Tensor dprobs = empty({p_.B, p_.NH, T_, T_}, dtype_of<T>());
    std::vector<Tensor> g = {empty(q.shape(), q.dtype()), empty(k.shape(), k.dtype()), empty(v.shape(), v.dtype())};
    const T *Q = q.data_ptr<T>(), *K = k.data_ptr<T>(), *V = v.data_ptr<T>(), *dO = dout.data_ptr<T>();
    const T* P = probs_->data_ptr<T>();
    T *dP = dprobs.data_ptr<T>(), *dQ = g[0].data_ptr<T>(), *dK = g[1].data_ptr<T>(), *dV = g[2].data_ptr<T>();
    const float scale = static_cast<float>(p_.scale());
    parallel_for(0, p_.B * p_.NH, 1, [&](int64_t begin, int64_t end) {
      for (int64_t h = begin; h < end; ++h) {
        const T* ph = P + h * scores;
        T* dph = dP + h * scores;
        const T* doh = dO + h * head;
        kernels::cpu::gemm_serial<T>(true, false, T_, HS, T_, 1.0f, ph, T_, doh, HS, 0.0f, dV + h * head, HS);
        kernels::cpu::gemm_serial<T>(false, true, T_, T_, HS, 1.0f, doh, HS, V + h * head, HS, 0.0f, dph, T_);
        for (int64_t i = 0; i < T_; ++i) softmax_backward_row(dph + i * T_, ph + i * T_);
        kernels::cpu::gemm_serial<T>(false, false, T_, HS, T_, scale, dph, T_, K + h * head, HS, 0.0f,
                                     dQ + h * head, HS);
        kernels::cpu::gemm_serial<T>(true, false, T_, HS, T_, scale, dph, T_, Q + h * head, HS, 0.0f,
                                     dK + h * head, HS);
      }
    });
    probs_.reset();
    return g;
  }

 private:
  // Row i of the scores: keys j > i (and before the window) masked, softmax over the rest, in f32.
  void softmax_causal_row(T* row, int64_t i) const {
    const int64_t j0 = p_.first_key(i);
    float max = -INFINITY, sum = 0.0f;
    for (int64_t j = j0; j <= i; ++j) max = std::max(max, static_cast<float>(row[j]));
    for (int64_t j = j0; j <= i; ++j) sum += std::exp(static_cast<float>(row[j]) - max);
    for (int64_t j = j0; j <= i; ++j) row[j] = static_cast<T>(std::exp(static_cast<float>(row[j]) - max) / sum);
    std::fill(row, row + j0, static_cast<T>(0.0f));
    std::fill(row + i + 1, row + p_.T, static_cast<T>(0.0f));
  }
  // dS = P (dP - sum_j P dP), in place over dP.
  void softmax_backward_row(T* dp, const T* prob) const {
    float dot = 0.0f;
    for (int64_t j = 0; j < p_.T; ++j) dot += static_cast<float>(prob[j]) * static_cast<float>(dp[j]);
    for (int64_t j = 0; j < p_.T; ++j)
      dp[j] = static_cast<T>(static_cast<float>(prob[j]) * (static_cast<float>(dp[j]) - dot));
  }

  Problem p_;
  std::optional<Tensor> probs_;
};

struct Timing {
  double forward_s, backward_s, total_s;
  double forward_cpu_s, backward_cpu_s, total_cpu_s;  // process CPU time: what others' load does not distort
  int64_t peak_bytes;
};

// Median forward, backward and total over `reps` runs after one warm-up; peak allocator
// bytes above what was live before a run. `reset` (untimed) frees the previous run's results
// first, so they count in neither the baseline nor the peak.
template <class Reset, class Fwd, class Bwd>
Timing measure(int reps, const Reset& reset, const Fwd& forward, const Bwd& backward) {
  std::vector<double> f, b, total, fc, bc, totalc;
  int64_t peak = 0;
  for (int r = -1; r < reps; ++r) {
    reset();
    host_allocator().reset_peak_stats();
    const int64_t live = host_allocator().stats().in_use.current;
    const double c0 = process_cpu_seconds();
    const auto t0 = Clock::now();
    auto state = forward();
    const auto t1 = Clock::now();
    const double c1 = process_cpu_seconds();
    backward(state);
    const auto t2 = Clock::now();
    const double c2 = process_cpu_seconds();
    peak = std::max(peak, host_allocator().stats().in_use.peak - live);
    if (r < 0) continue;  // warm-up: allocator cache, page faults
    f.push_back(std::chrono::duration<double>(t1 - t0).count());
    b.push_back(std::chrono::duration<double>(t2 - t1).count());
    total.push_back(std::chrono::duration<double>(t2 - t0).count());
    fc.push_back(c1 - c0);
    bc.push_back(c2 - c1);
    totalc.push_back(c2 - c0);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  return {median(f), median(b), median(total), median(fc), median(bc), median(totalc), peak};
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = to_vector<double>(a), y = to_vector<double>(b);
  double m = 0.0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::fabs(x[i] - y[i]));
  return m;
}

nlohmann::json report(const Timing& t, double forward_flops, double backward_flops) {
  return {{"forward_ms", t.forward_s * 1e3},
          {"backward_ms", t.backward_s * 1e3},
          {"total_ms", t.total_s * 1e3},
          {"forward_gflops", forward_flops / t.forward_s / 1e9},
          {"backward_gflops", backward_flops / t.backward_s / 1e9},
          {"total_gflops", (forward_flops + backward_flops) / t.total_s / 1e9},
          {"forward_cpu_ms", t.forward_cpu_s * 1e3},
          {"backward_cpu_ms", t.backward_cpu_s * 1e3},
          {"total_gflops_per_cpu_second", (forward_flops + backward_flops) / t.total_cpu_s / 1e9},
          {"peak_mib", static_cast<double>(t.peak_bytes) / (1 << 20)}};
}

template <class T>
nlohmann::json run(const Problem& p, int reps, bool with_naive) {
  const DType dtype = dtype_of<T>();
  Generator gen(0);
  const Shape shape{p.B, p.NH, p.T, p.HS}, kv_shape{p.B, p.NKV, p.T, p.HS};
  const Tensor q = core::cast(randn(shape, gen), dtype), k = core::cast(randn(kv_shape, gen), dtype);
  const Tensor v = core::cast(randn(kv_shape, gen), dtype), dout = core::cast(randn(shape, gen), dtype);

  // trident, through the differentiable API (what a model calls); tokens-first, the leaves
  // hold the same values stored (B, T, heads, HS).
  auto leaf = [&](const Tensor& t) { return p.tokens_first ? contiguous(transpose(t, 1, 2)) : detach(t); };
  Tensor qg = leaf(q), kg = leaf(k), vg = leaf(v);
  for (Tensor* t : {&qg, &kg, &vg}) t->set_requires_grad(true);
  auto trident_reset = [&] {
    for (Tensor* t : {&qg, &kg, &vg}) t->zero_grad();
  };
  auto trident_forward = [&] {
    if (!p.tokens_first)
      return trident::attention(qg, kg, vg, /*causal=*/true, std::nullopt, AttentionOutputLayout::kHeadsFirst, p.window);
    return trident::attention(transpose(qg, 1, 2), transpose(kg, 1, 2), transpose(vg, 1, 2), /*causal=*/true,
                              std::nullopt, AttentionOutputLayout::kTokensFirst, p.window);
  };
  auto trident_backward = [&](const Tensor& out) { autograd::backward({out}, {dout}); };

  NaiveAttention<T> naive(p);
  std::vector<Tensor> naive_grads;
  auto naive_reset = [&] { naive_grads.clear(); };
  auto naive_forward = [&] { return naive.forward(q, k, v); };
  auto naive_backward = [&](const Tensor&) { naive_grads = naive.backward(dout, q, k, v); };

  // Agreement first: both runs leave their results behind.
  trident_reset();
  const Tensor out_t = trident_forward();
  trident_backward(out_t);
  nlohmann::json diff;
  if (with_naive) {
    const Tensor out_n = naive_forward();
    naive_backward(out_n);
    diff = {{"out", max_abs_diff(out_t, out_n)},
            {"dq", max_abs_diff(*qg.grad(), naive_grads[0])},
            {"dk", max_abs_diff(*kg.grad(), naive_grads[1])},
            {"dv", max_abs_diff(*vg.grad(), naive_grads[2])}};
  }

  // Useful FLOPs (see the note in the JSON): 2 per multiply-add, visible pairs only.
  double visible = 0;  // (query, key) pairs per head
  for (int64_t i = 0; i < p.T; ++i) visible += static_cast<double>(i - p.first_key(i) + 1);
  const double pairs = static_cast<double>(p.B * p.NH) * visible;
  const double forward_flops = 2 * 2 * pairs * p.HS, backward_flops = 4 * 2 * pairs * p.HS;
  const Timing t = measure(reps, trident_reset, trident_forward, trident_backward);
  nlohmann::json result = {{"dtype", dtype_name(dtype)}, {"trident", report(t, forward_flops, backward_flops)}};
  if (!with_naive) return result;
  const Timing n = measure(reps, naive_reset, naive_forward, naive_backward);
  result.update({{"naive", report(n, forward_flops, backward_flops)},
          {"speedup_total", n.total_s / t.total_s},
          {"speedup_forward", n.forward_s / t.forward_s},
          {"speedup_backward", n.backward_s / t.backward_s},
          {"memory_ratio", static_cast<double>(n.peak_bytes) / static_cast<double>(t.peak_bytes)},
          {"max_abs_diff_trident_vs_naive", diff}});
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, reps = 5;
  bool naive = true;
  std::string dtypes = "both";
  Problem p{4, 12, 1024, 64};
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) threads = std::stoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::stoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--T") && i + 1 < argc) p.T = std::stoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--window") && i + 1 < argc) p.window = std::stoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--NH") && i + 1 < argc) p.NH = std::stoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--NKV") && i + 1 < argc) p.NKV = std::stoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--dtype") && i + 1 < argc) dtypes = argv[++i];
    else if (!std::strcmp(argv[i], "--no-naive")) naive = false;
    else if (!std::strcmp(argv[i], "--tokens-first")) p.tokens_first = true;
    else {
      std::fprintf(stderr, "attention_bench: unknown argument '%s' (see the usage at the top of bench/attention_bench.cc)\n", argv[i]);
      return 2;
    }
  }
  if (p.NKV == 0) p.NKV = p.NH;
  if (p.NKV <= 0 || p.NH % p.NKV != 0) {
    std::fprintf(stderr, "attention_bench: --NKV %lld must divide --NH %lld\n", static_cast<long long>(p.NKV), static_cast<long long>(p.NH));
    return 2;
  }
  if (dtypes != "both" && dtypes != "f32" && dtypes != "bf16") {
    std::fprintf(stderr, "attention_bench: --dtype '%s': expected f32, bf16 or both\n", dtypes.c_str());
    return 2;
  }
  naive = naive && p.NKV == p.NH && !p.tokens_first;
  set_num_threads(threads);
  nlohmann::json out;
  out["benchmark"] = "attention";
  out["shape"] = {{"B", p.B}, {"NH", p.NH}, {"NKV", p.NKV}, {"T", p.T}, {"HS", p.HS}, {"causal", true}, {"window", p.window},
                  {"layout", p.tokens_first ? "tokens-first views" : "heads-first"}};
  out["threads"] = threads;
  out["reps"] = reps;
  out["note"] =
      "median of reps after one warm-up. GFLOP/s counts useful FLOPs only: 2 per multiply-add "
      "of the products the math needs (forward Q K^T and P V; backward dV, dP, dQ, dK) over "
      "the visible (query, key) pairs per head (T(T+1)/2, fewer with a window); both implementations are credited the "
      "same count (the naive one computes all T^2 pairs; trident's backward recomputes Q K^T), "
      "and exp/softmax work is not counted. peak_mib: host allocator bytes in use above those "
      "live before the step (inputs excluded; output, cached values, gradients and scratch "
      "included).";
  if (dtypes != "bf16") out["results"].push_back(run<float>(p, reps, naive));
  if (dtypes != "f32") out["results"].push_back(run<bf16>(p, reps, naive));
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
