#include "parallel/onebit_adam.h"

#include <cmath>
#include <cstring>
#include <string>

#include "core/copy.h"
#include "core/factory.h"
#include "core/profiler.h"
#include "core/views.h"

namespace trident::parallel {
namespace {

// DeepSpeed's sign: x.sign().add_(1).bool(), so 0 (and NaN) count as +.
inline bool positive(float x) { return !(x < 0.0f); }

// Signs of `x` into `words` (32 to a word, element i at bit i % 32 of word i / 32); returns
// the scale ||x|| / sqrt(n) and sets error = x - scale * sign(x).
float compress(const float* x, int64_t n, float* error, uint32_t* words) {
  double sq = 0.0;
  for (int64_t i = 0; i < n; ++i) sq += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(std::sqrt(sq) / std::sqrt(static_cast<double>(n)));
  for (int64_t w = 0; w < n / 32; ++w) {
    uint32_t bits = 0;
    for (int b = 0; b < 32; ++b) {
      const int64_t i = w * 32 + b;
      const bool pos = positive(x[i]);
      bits |= static_cast<uint32_t>(pos) << b;
      error[i] = x[i] - (pos ? scale : -scale);
    }
    words[w] = bits;
  }
  return scale;
}

inline float sign_at(const uint32_t* words, int64_t i) { return ((words[i / 32] >> (i % 32)) & 1u) ? 1.0f : -1.0f; }

// A block of the exchange: [scale as the bits of a float][n / 32 words of signs].
uint32_t* block(const Tensor& t, int64_t words, int64_t j) {
  return reinterpret_cast<uint32_t*>(t.data_ptr<int32_t>()) + j * (words + 1);
}
float scale_of(const uint32_t* blk) {
  float s;
  std::memcpy(&s, blk, sizeof s);
  return s;
}
void set_scale(uint32_t* blk, float s) { std::memcpy(blk, &s, sizeof s); }

}  // namespace

int64_t onebit_padding(int ranks) { return 32 * static_cast<int64_t>(ranks); }

void onebit_allreduce(comm::Communicator& comm, const Tensor& x, const Tensor& worker_error, const Tensor& server_error) {
  const int N = comm.size();
  const int64_t n = x.numel();
  TRI_CHECK(x.dtype() == DType::kF32 && x.is_contiguous() && x.device().is_cpu() && n % onebit_padding(N) == 0,
            "1-bit all-reduce: expected a contiguous f32 host tensor of a multiple of ", onebit_padding(N),
            " elements, got ", x.dtype(), " ", x.shape(), " on ", x.device());
  TRI_CHECK(worker_error.numel() == n && server_error.numel() == n / N, "1-bit all-reduce: error buffers of ",
            worker_error.numel(), " and ", server_error.numel(), " elements for ", n, " over ", N, " ranks");
  const int64_t chunk = n / N, words = chunk / 32;
  float* xp = x.data_ptr<float>();
  float* we = worker_error.data_ptr<float>();
  float* se = server_error.data_ptr<float>();

  // Worker: compensate, one scale for the whole buffer, signs of each rank's chunk.
  for (int64_t i = 0; i < n; ++i) xp[i] += we[i];
  Tensor send = empty({N * (words + 1)}, DType::kI32), recv = empty({N * (words + 1)}, DType::kI32);
  {
    std::vector<uint32_t> all(static_cast<size_t>(n / 32));
    const float scale = compress(xp, n, we, all.data());
    for (int j = 0; j < N; ++j) {
      uint32_t* blk = block(send, words, j);
      set_scale(blk, scale);
      std::memcpy(blk + 1, all.data() + j * words, static_cast<size_t>(words) * sizeof(uint32_t));
    }
  }
  comm.all_to_all(send, recv);

  // Server of chunk `rank`: the ranks' decompressed mean, compensated, compressed again.
  std::vector<float> mean(static_cast<size_t>(chunk), 0.0f);
  const float inv = 1.0f / static_cast<float>(N);
  for (int j = 0; j < N; ++j) {
    const uint32_t* blk = block(recv, words, j);
    const float s = scale_of(blk) * inv;
    for (int64_t i = 0; i < chunk; ++i) mean[static_cast<size_t>(i)] += sign_at(blk + 1, i) * s;
  }
  for (int64_t i = 0; i < chunk; ++i) mean[static_cast<size_t>(i)] += se[i];
  Tensor mine = empty({words + 1}, DType::kI32), gathered = empty({N * (words + 1)}, DType::kI32);
  uint32_t* own = block(mine, words, 0);
  set_scale(own, compress(mean.data(), chunk, se, own + 1));
  comm.all_gather(mine, gathered);

  // Every rank decompresses every server's chunk.
  for (int j = 0; j < N; ++j) {
    const uint32_t* blk = block(gathered, words, j);
    const float s = scale_of(blk);
    for (int64_t i = 0; i < chunk; ++i) xp[j * chunk + i] = sign_at(blk + 1, i) * s;
  }
  x.bump_version();
  worker_error.bump_version();
  server_error.bump_version();
}

namespace {

int64_t padded(int64_t n, int ranks) { return (n + onebit_padding(ranks) - 1) / onebit_padding(ranks) * onebit_padding(ranks); }

}  // namespace

OnebitAdam::OnebitAdam(std::vector<nn::NamedTensor> params, optim::AdamW& adam, comm::Communicator& comm,
                       int64_t warmup_steps)
    : params_(std::move(params)), adam_(adam), comm_(comm), warmup_(warmup_steps) {
  TRI_CHECK(warmup_steps >= 1, "parallel.onebit_warmup_steps must be at least 1 (the variance freezes after it), got ",
            warmup_steps);
  MemoryCategoryGuard guard(MemoryCategory::kOptimizerState);
  for (const auto& [name, p] : params_) {
    TRI_CHECK(p.dtype() == DType::kF32 && p.is_contiguous() && p.device().is_cpu(),
              "parallel.grad_compression = onebit_adam steps contiguous f32 host tensors; '", name, "' is ", p.dtype(),
              " on ", p.device());
    const int64_t n = padded(p.numel(), comm.size());
    buffers_.push_back({zeros({n}, DType::kF32), zeros({n}, DType::kF32), zeros({n / comm.size()}, DType::kF32)});
  }
}

void OnebitAdam::step(double lr) {
  TRI_CHECK(compressing(), "OnebitAdam::step during the warm-up (step ", step_, " of ", warmup_, ")");
  profiler::ProfileScope scope("onebit_adam.step", profiler::Phase::kOptimizer);
  const std::vector<nn::NamedTensor> state = adam_.state();
  TRI_CHECK(state.size() == 2 * params_.size(), "1-bit Adam: AdamW holds state for ", state.size() / 2, " of ",
            params_.size(), " parameters after the warm-up");
  const optim::AdamWOptions& o = adam_.options();
  const float b1 = static_cast<float>(o.beta1), one_minus_b1 = static_cast<float>(1.0 - o.beta1);
  ++step_;
  const double bc1 = 1.0 - std::pow(o.beta1, static_cast<double>(step_));
  const double bc2 = 1.0 - std::pow(o.beta2, static_cast<double>(warmup_));  // frozen with v
  const float step_size = static_cast<float>(lr / bc1), sqrt_bc2 = static_cast<float>(std::sqrt(bc2));
  const float eps = static_cast<float>(o.eps);
  // Each parameter's momentum is compressed on its own, with its own scales, as DeepSpeed's
  // OnebitAdam does per parameter: one scale over tensors of different magnitudes would
  // round the small ones' momentum up to the large ones'.
  for (size_t k = 0; k < params_.size(); ++k) {
    const Tensor& p = params_[k].second;
    TRI_CHECK(state[2 * k].first == params_[k].first + ".exp_avg", "1-bit Adam: AdamW state out of order at '",
              state[2 * k].first, "'");
    float* m = state[2 * k].second.data_ptr<float>();
    const float* v = state[2 * k + 1].second.data_ptr<float>();
    const std::optional<Tensor> g = p.grad();
    const Tensor grad = g ? core::contiguous(*g) : zeros(p.shape(), DType::kF32);
    const float* gp = grad.data_ptr<float>();
    Buffers& b = buffers_[k];
    float* flat = b.flat.data_ptr<float>();
    const int64_t n = p.numel();
    for (int64_t i = 0; i < n; ++i) flat[i] = m[i] * b1 + gp[i] * one_minus_b1;
    std::fill(flat + n, flat + b.flat.numel(), 0.0f);
    onebit_allreduce(comm_, b.flat, b.worker_error, b.server_error);
    float* w = p.data_ptr<float>();
    const float decay = p.dim() >= 2 ? static_cast<float>(1.0 - lr * o.weight_decay) : 1.0f;
    for (int64_t i = 0; i < n; ++i) {
      m[i] = flat[i];
      w[i] = w[i] * decay - step_size * (m[i] / (std::sqrt(v[i]) / sqrt_bc2 + eps));
    }
    state[2 * k].second.bump_version();
    p.bump_version();
  }
}

std::vector<nn::NamedTensor> OnebitAdam::state() const {
  std::vector<nn::NamedTensor> out;
  for (size_t k = 0; k < params_.size(); ++k) {
    out.emplace_back("onebit." + params_[k].first + ".worker_error", buffers_[k].worker_error);
    out.emplace_back("onebit." + params_[k].first + ".server_error", buffers_[k].server_error);
  }
  return out;
}

void OnebitAdam::load_state(const std::function<Tensor(const std::string&)>& read, int64_t step) {
  const std::vector<nn::NamedTensor> mine = state();
  for (const auto& [name, dst] : mine) {
    const Tensor t = read(name);
    TRI_CHECK(t.numel() == dst.numel(), "1-bit Adam state '", name, "' has ", t.numel(), " elements; this run needs ",
              dst.numel(), " (saved with another rank count?)");
    core::copy_(dst, views::view(core::contiguous(t), dst.shape().span()));
  }
  step_ = step;
}

}  // namespace trident::parallel
