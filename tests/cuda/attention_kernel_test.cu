// The CUDA attention kernels alone (src/kernels/cuda/attention.cu), against a float64 host
// reference: every dtype, head sizes 3..128, lengths 1..300 (partial tiles), causal or not,
// sliding windows,
// grouped- and multi-query heads, transposed output layouts; forward, lse and all three
// gradients. Finer-grained than the op suite's attention cases, for tuning the kernels.
// ctest runs it (label cuda); without a GPU it exits 77, which ctest reports as skipped.
//   build/tests/attention_kernel_test                 tensor-core path where eligible
//   TRIDENT_ATTENTION_GENERIC=1 build/tests/attention_kernel_test   generic path everywhere
//   build/tests/attention_kernel_test bench           bf16 timings, one JSON object per line
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cuda/attention.cuh"

using namespace trident::cuda;

#define CK(x)                                                                         \
  do {                                                                                \
    cudaError_t e_ = (x);                                                             \
    if (e_ != cudaSuccess) {                                                          \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

static double to_d(float x) { return x; }
static double to_d(double x) { return x; }
static double to_d(__nv_bfloat16 x) { return __bfloat162float(x); }
static double to_d(__half x) { return __half2float(x); }
template <class T> T from_d(double x);
template <> float from_d<float>(double x) { return (float)x; }
template <> double from_d<double>(double x) { return x; }
template <> __nv_bfloat16 from_d<__nv_bfloat16>(double x) { return __float2bfloat16_rn((float)x); }
template <> __half from_d<__half>(double x) { return __float2half_rn((float)x); }

struct Layout {  // element (b,h,t,d) at b*bs + h*hs + t*ts + d
  int64_t bs, hs, ts, size;
};
static Layout contiguous(int64_t B, int64_t H, int64_t T, int64_t HS) { return {H * T * HS, T * HS, HS, B * H * T * HS}; }
static Layout transposed(int64_t B, int64_t H, int64_t T, int64_t HS) { return {T * H * HS, HS, H * HS, B * H * T * HS}; }

template <class T>
struct Buf {
  std::vector<T> host;
  T* dev = nullptr;
  Layout lay;
  Buf(Layout l) : host(l.size), lay(l) { CK(cudaMalloc(&dev, l.size * sizeof(T) + 64)); }
  ~Buf() { cudaFree(dev); }
  void up() { CK(cudaMemcpy(dev, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice)); }
  void down() { CK(cudaMemcpy(host.data(), dev, host.size() * sizeof(T), cudaMemcpyDeviceToHost)); }
  Heads heads() const { return {dev, lay.bs, lay.hs, lay.ts}; }
  double at(int64_t b, int64_t h, int64_t t, int64_t d) const { return to_d(host[b * lay.bs + h * lay.hs + t * lay.ts + d]); }
};

template <class T> int code();
template <> int code<float>() { return 0; }
template <> int code<double>() { return 1; }
template <> int code<__nv_bfloat16>() { return 2; }
template <> int code<__half>() { return 3; }
template <class T> const char* name();
template <> const char* name<float>() { return "f32"; }
template <> const char* name<double>() { return "f64"; }
template <> const char* name<__nv_bfloat16>() { return "bf16"; }
template <> const char* name<__half>() { return "f16"; }
template <class T> double tol();
template <> double tol<float>() { return 2e-4; }
template <> double tol<double>() { return 1e-9; }
template <> double tol<__nv_bfloat16>() { return 4e-2; }
template <> double tol<__half>() { return 8e-3; }

static int failures = 0;

// The largest error relative to the largest reference value. dq and dk are sums of terms
// dS_j k_j whose dS_j sum to zero over j, so they can cancel to nothing (exactly, at T = 1:
// P = 1 and dS = 0); `mag`, the sum of the terms' absolute values, then sets the scale: the
// error is judged against at least kCancelFloor of it, not against a rounding residue.
constexpr double kCancelFloor = 1e-2;
struct Err {
  double max_abs = 0, max_ref = 0, max_mag = 0;
  void add(double got, double ref, double mag = 0) {
    max_abs = std::fmax(max_abs, std::fabs(got - ref));
    if (!(std::fabs(got - ref) <= 1e300)) max_abs = INFINITY;  // NaN
    max_ref = std::fmax(max_ref, std::fabs(ref));
    max_mag = std::fmax(max_mag, mag);
  }
  double rel() const { return max_abs / (std::fmax(max_ref, kCancelFloor * max_mag) + 1e-30); }
};

template <class T>
void check(int B, int NH, int NKV, int T_, int HS, bool causal, bool transposed_out, int window = 0) {
  using A = std::conditional_t<std::is_same<T, double>::value, double, float>;
  std::mt19937 rng(B * 1000003 + NH * 10007 + T_ * 101 + HS * 7 + causal + 13 * window);
  std::uniform_real_distribution<double> U(-1, 1);
  const int group = NH / NKV;
  const double scale = 1.0 / std::sqrt((double)HS);
  Buf<T> q(transposed_out ? transposed(B, NH, T_, HS) : contiguous(B, NH, T_, HS));
  Buf<T> k(contiguous(B, NKV, T_, HS)), v(contiguous(B, NKV, T_, HS));
  Buf<T> out(transposed_out ? transposed(B, NH, T_, HS) : contiguous(B, NH, T_, HS));
  Buf<T> dout(contiguous(B, NH, T_, HS)), dq(contiguous(B, NH, T_, HS));
  Buf<T> dk(contiguous(B, NKV, T_, HS)), dv(contiguous(B, NKV, T_, HS));
  for (auto* x : {&q, &k, &v, &dout})
    for (auto& e : x->host) e = from_d<T>(2 * U(rng));
  for (auto* x : {&out, &dq, &dk, &dv}) {
    for (auto& e : x->host) e = from_d<T>(12345.0);  // garbage that must be overwritten
    x->up();
  }
  q.up(), k.up(), v.up(), dout.up();
  A* lse;
  CK(cudaMalloc(&lse, sizeof(A) * B * NH * T_));
  AttentionDims d{B, NH, NKV, T_, HS, causal, scale, window};
  launch_attention_forward(code<T>(), out.heads(), lse, q.heads(), k.heads(), v.heads(), d);
  CK(cudaGetLastError());
  launch_attention_backward(code<T>(), dq.heads(), dk.heads(), dv.heads(), dout.heads(), q.heads(), k.heads(),
                            v.heads(), out.heads(), lse, d);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  out.down(), dq.down(), dk.down(), dv.down();
  std::vector<A> lse_h(B * NH * T_);
  CK(cudaMemcpy(lse_h.data(), lse, sizeof(A) * lse_h.size(), cudaMemcpyDeviceToHost));
  CK(cudaFree(lse));

  // Reference in double from the rounded inputs.
  Err e_out, e_lse, e_dq, e_dk, e_dv;
  std::vector<double> dk_ref((size_t)B * NKV * T_ * HS, 0), dv_ref(dk_ref.size(), 0), dk_mag(dk_ref.size(), 0);
  std::vector<double> P(T_), dP(T_), dP_mag(T_), o(HS);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h) {
      const int g = h / group;
      for (int i = 0; i < T_; ++i) {
        const int n = causal ? i + 1 : T_, j0 = window > 0 ? std::max(0, i - window + 1) : 0;
        double mx = -INFINITY;
        for (int j = j0; j < n; ++j) {
          double s = 0;
          for (int x = 0; x < HS; ++x) s += q.at(b, h, i, x) * k.at(b, g, j, x);
          P[j] = s * scale;
          mx = std::fmax(mx, P[j]);
        }
        double sum = 0;
        for (int j = j0; j < n; ++j) sum += std::exp(P[j] - mx);
        const double lse_ref = mx + std::log(sum);
        for (int j = j0; j < n; ++j) P[j] = std::exp(P[j] - lse_ref);
        for (int x = 0; x < HS; ++x) {
          o[x] = 0;
          for (int j = j0; j < n; ++j) o[x] += P[j] * v.at(b, g, j, x);
          e_out.add(out.at(b, h, i, x), o[x]);
        }
        e_lse.add(lse_h[((size_t)b * NH + h) * T_ + i], lse_ref);
        double D = 0;
        for (int x = 0; x < HS; ++x) D += dout.at(b, h, i, x) * o[x];
        for (int j = j0; j < n; ++j) {
          double s = 0;
          for (int x = 0; x < HS; ++x) s += dout.at(b, h, i, x) * v.at(b, g, j, x);
          dP[j] = P[j] * (s - D);  // dS
          dP_mag[j] = P[j] * (std::fabs(s) + std::fabs(D));
        }
        for (int x = 0; x < HS; ++x) {
          double a = 0, mag = 0;
          for (int j = j0; j < n; ++j) {
            a += dP[j] * k.at(b, g, j, x);
            mag += dP_mag[j] * std::fabs(k.at(b, g, j, x));
          }
          e_dq.add(dq.at(b, h, i, x), a * scale, mag * scale);
        }
        for (int j = j0; j < n; ++j)
          for (int x = 0; x < HS; ++x) {
            const size_t idx = (((size_t)b * NKV + g) * T_ + j) * HS + x;
            dk_ref[idx] += dP[j] * q.at(b, h, i, x) * scale;
            dk_mag[idx] += dP_mag[j] * std::fabs(q.at(b, h, i, x)) * scale;
            dv_ref[idx] += P[j] * dout.at(b, h, i, x);
          }
      }
    }
  for (int b = 0; b < B; ++b)
    for (int g = 0; g < NKV; ++g)
      for (int j = 0; j < T_; ++j)
        for (int x = 0; x < HS; ++x) {
          const size_t idx = (((size_t)b * NKV + g) * T_ + j) * HS + x;
          e_dk.add(dk.at(b, g, j, x), dk_ref[idx], dk_mag[idx]);
          e_dv.add(dv.at(b, g, j, x), dv_ref[idx]);
        }
  const double t = tol<T>();
  const bool ok = e_out.rel() < t && e_lse.rel() < t && e_dq.rel() < t && e_dk.rel() < t && e_dv.rel() < t;
  failures += !ok;
  std::printf("%s %-4s B=%d NH=%d NKV=%d T=%4d HS=%3d causal=%d win=%d tout=%d | rel err out %.2e lse %.2e dq %.2e dk %.2e dv %.2e\n",
              ok ? "ok  " : "FAIL", name<T>(), B, NH, NKV, T_, HS, causal, window, transposed_out, e_out.rel(), e_lse.rel(),
              e_dq.rel(), e_dk.rel(), e_dv.rel());
}

template <class T>
void suite() {
  const int hs_list[] = {3, 5, 8, 16, 32, 48, 64, 80, 128};
  const int t_list[] = {1, 2, 7, 16, 17, 40, 63, 64, 65, 130};
  for (int HS : hs_list)
    for (int T_ : t_list)
      for (int causal = 0; causal < 2; ++causal) check<T>(2, 4, 2, T_, HS, causal, (T_ + HS) % 2 == 0);
  check<T>(1, 3, 1, 200, 64, true, true);   // MQA
  check<T>(1, 2, 2, 300, 128, true, false);
  check<T>(1, 2, 1, 257, 16, false, true);
  // Sliding windows (Mistral): shorter than a tile, across tile edges, of one key, with GQA.
  for (int HS : {8, 16, 64, 128})
    for (int window : {1, 5, 63, 64, 65, 100})
      check<T>(2, 4, 2, 200, HS, true, window % 2 == 0, window);
}

// A few cases per kernel path (tensor cores: bf16 at HS 16/64/128; generic: f32), for
// compute-sanitizer, whose racecheck is too slow for the whole suite.
template <class T>
void quick_suite() {
  for (int HS : {16, 64, 128})
    for (int T_ : {17, 64, 130})
      for (int causal = 0; causal < 2; ++causal) check<T>(1, 2, 1, T_, HS, causal, causal == 1);
  for (int HS : {16, 64, 128}) check<T>(1, 2, 1, 150, HS, true, false, 40);
}

static void bench(int B, int NH, int T_, int HS, bool causal) {
  using T = __nv_bfloat16;
  const size_t n = (size_t)B * NH * T_ * HS;
  T *q, *k, *v, *o, *g, *dq, *dk, *dv;
  for (T** p : {&q, &k, &v, &o, &g, &dq, &dk, &dv}) {
    CK(cudaMalloc(p, n * sizeof(T)));
    CK(cudaMemset(*p, 0x3c, n * sizeof(T)));  // ~0.01: finite
  }
  float* lse;
  CK(cudaMalloc(&lse, sizeof(float) * B * NH * T_));
  Heads H{nullptr, (int64_t)NH * T_ * HS, (int64_t)T_ * HS, HS};
  auto hd = [&](T* p) { Heads x = H; x.data = p; return x; };
  AttentionDims d{B, NH, NH, T_, HS, causal, 1.0 / std::sqrt((double)HS), 0};
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0), cudaEventCreate(&e1);
  const int reps = 10;
  float ms_f = 0, ms_b = 0;
  for (int pass = 0; pass < 2; ++pass) {
    cudaEventRecord(e0);
    for (int r = 0; r < reps; ++r) launch_attention_forward(2, hd(o), lse, hd(q), hd(k), hd(v), d);
    cudaEventRecord(e1);
    CK(cudaEventSynchronize(e1));
    cudaEventElapsedTime(&ms_f, e0, e1);
    cudaEventRecord(e0);
    for (int r = 0; r < reps; ++r)
      launch_attention_backward(2, hd(dq), hd(dk), hd(dv), hd(g), hd(q), hd(k), hd(v), hd(o), lse, d);
    cudaEventRecord(e1);
    CK(cudaEventSynchronize(e1));
    cudaEventElapsedTime(&ms_b, e0, e1);
  }
  CK(cudaGetLastError());
  const double flops_f = 4.0 * B * NH * (double)T_ * T_ * HS * (causal ? 0.5 : 1.0);
  std::printf("{\"dtype\": \"bf16\", \"B\": %d, \"NH\": %d, \"T\": %d, \"HS\": %d, \"causal\": %d, \"fwd_ms\": %.4f, "
              "\"fwd_tflops\": %.2f, \"bwd_ms\": %.4f, \"bwd_tflops\": %.2f}\n",
              B, NH, T_, HS, causal, ms_f / reps, flops_f / (ms_f / reps * 1e-3) / 1e12, ms_b / reps,
              2.5 * flops_f / (ms_b / reps * 1e-3) / 1e12);
  for (T* p : {q, k, v, o, g, dq, dk, dv}) cudaFree(p);
  cudaFree(lse);
}

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("skipped: no CUDA device\n");
    return 77;
  }
  if (argc > 1 && std::strcmp(argv[1], "bench") == 0) {
    bench(8, 12, 1024, 64, true);
    bench(8, 12, 1024, 64, false);
    bench(4, 16, 2048, 64, true);
    bench(4, 32, 4096, 128, true);
    bench(4, 16, 2048, 128, false);
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "quick") == 0) {
    quick_suite<__nv_bfloat16>();
    quick_suite<float>();
    std::printf("%d failures\n", failures);
    return failures != 0;
  }
  suite<double>();
  suite<float>();
  suite<__nv_bfloat16>();
  suite<__half>();
  std::printf("%d failures\n", failures);
  return failures != 0;
}
