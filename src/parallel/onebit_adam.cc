#include "parallel/onebit_adam.h"

#include <algorithm>
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

// Signs of `x` into `words` (32 to a word, element i at bit i % 32 of word i / 32), with one
// scale ||x_b|| / sqrt(block) per block of `block` elements into `scales`; sets error = x -
// scale * sign(x).
void compress(const float* x, int64_t n, int64_t block, float* error, uint32_t* words, float* scales) {
  for (int64_t b0 = 0; b0 < n; b0 += block) {
    double sq = 0.0;
    for (int64_t i = b0; i < b0 + block; ++i) sq += static_cast<double>(x[i]) * x[i];
    scales[b0 / block] = static_cast<float>(std::sqrt(sq) / std::sqrt(static_cast<double>(block)));
  }
  for (int64_t w = 0; w < n / 32; ++w) {
    uint32_t bits = 0;
    const float scale = scales[w * 32 / block];
    for (int b = 0; b < 32; ++b) {
      const int64_t i = w * 32 + b;
      const bool pos = positive(x[i]);
      bits |= static_cast<uint32_t>(pos) << b;
      error[i] = x[i] - (pos ? scale : -scale);
    }
    words[w] = bits;
  }
}

inline float sign_at(const uint32_t* words, int64_t i) { return ((words[i / 32] >> (i % 32)) & 1u) ? 1.0f : -1.0f; }

// A chunk's message: [its S scales as the bits of floats][chunk / 32 words of signs].
struct Message {
  int64_t scales, words;
  int64_t size() const { return scales + words; }
  uint32_t* at(const Tensor& t, int64_t j) const { return reinterpret_cast<uint32_t*>(t.data_ptr<int32_t>()) + j * size(); }
  float scale(const uint32_t* m, int64_t i, int64_t chunk) const {  // element i's
    float s;
    std::memcpy(&s, m + i / (chunk / scales), sizeof s);
    return s;
  }
};

}  // namespace

int64_t onebit_padding(int ranks, int64_t block) { return static_cast<int64_t>(ranks) * (block > 0 ? block : 32); }

void check_onebit_block(int64_t block) {
  TRI_CHECK(block >= 0 && block % 32 == 0, "parallel.onebit_block must be 0 (one scale per rank's buffer and per "
            "chunk, as DeepSpeed) or a positive multiple of 32 (elements per scale), got ", block);
}

void onebit_allreduce(comm::Communicator& comm, const Tensor& x, const Tensor& worker_error, const Tensor& server_error,
                      int64_t block) {
  check_onebit_block(block);
  const int N = comm.size();
  const int64_t n = x.numel();
  TRI_CHECK(x.dtype() == DType::kF32 && x.is_contiguous() && x.device().is_cpu() && n % onebit_padding(N, block) == 0,
            "1-bit all-reduce: expected a contiguous f32 host tensor of a multiple of ", onebit_padding(N, block),
            " elements, got ", x.dtype(), " ", x.shape(), " on ", x.device());
  TRI_CHECK(worker_error.numel() == n && server_error.numel() == n / N, "1-bit all-reduce: error buffers of ",
            worker_error.numel(), " and ", server_error.numel(), " elements for ", n, " over ", N, " ranks");
  const int64_t chunk = n / N;
  const Message msg{block > 0 ? chunk / block : 1, chunk / 32};
  float* xp = x.data_ptr<float>();
  float* we = worker_error.data_ptr<float>();
  float* se = server_error.data_ptr<float>();

  // Worker: compensate, scales per block (or one for the whole buffer), signs of each rank's chunk.
  for (int64_t i = 0; i < n; ++i) xp[i] += we[i];
  Tensor send = empty({N * msg.size()}, DType::kI32), recv = empty({N * msg.size()}, DType::kI32);
  {
    const int64_t wb = block > 0 ? block : n;
    std::vector<uint32_t> all(static_cast<size_t>(n / 32));
    std::vector<float> scales(static_cast<size_t>(n / wb));
    compress(xp, n, wb, we, all.data(), scales.data());
    for (int j = 0; j < N; ++j) {
      uint32_t* m = msg.at(send, j);
      for (int64_t s = 0; s < msg.scales; ++s)
        std::memcpy(m + s, &scales[static_cast<size_t>((j * chunk + s * (chunk / msg.scales)) / wb)], sizeof(float));
      std::memcpy(m + msg.scales, all.data() + j * msg.words, static_cast<size_t>(msg.words) * sizeof(uint32_t));
    }
  }
  comm.all_to_all(send, recv);

  // Server of chunk `rank`: the ranks' decompressed mean, compensated, compressed again.
  std::vector<float> mean(static_cast<size_t>(chunk), 0.0f);
  const float inv = 1.0f / static_cast<float>(N);
  for (int j = 0; j < N; ++j) {
    const uint32_t* m = msg.at(recv, j);
    for (int64_t i = 0; i < chunk; ++i)
      mean[static_cast<size_t>(i)] += sign_at(m + msg.scales, i) * (msg.scale(m, i, chunk) * inv);
  }
  for (int64_t i = 0; i < chunk; ++i) mean[static_cast<size_t>(i)] += se[i];
  Tensor mine = empty({msg.size()}, DType::kI32), gathered = empty({N * msg.size()}, DType::kI32);
  uint32_t* own = msg.at(mine, 0);
  std::vector<float> scales(static_cast<size_t>(msg.scales));
  compress(mean.data(), chunk, chunk / msg.scales, se, own + msg.scales, scales.data());
  std::memcpy(own, scales.data(), scales.size() * sizeof(float));
  comm.all_gather(mine, gathered);

  // Every rank decompresses every server's chunk.
  for (int j = 0; j < N; ++j) {
    const uint32_t* m = msg.at(gathered, j);
    for (int64_t i = 0; i < chunk; ++i) xp[j * chunk + i] = sign_at(m + msg.scales, i) * msg.scale(m, i, chunk);
  }
  x.bump_version();
  worker_error.bump_version();
  server_error.bump_version();
}

namespace {

int64_t padded(int64_t n, int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

}  // namespace

OnebitAdam::OnebitAdam(std::vector<nn::NamedTensor> params, optim::AdamW& adam, comm::Communicator& comm,
                       int64_t warmup_steps, int64_t block, bool bound)
    : params_(std::move(params)), adam_(adam), comm_(comm), warmup_(warmup_steps), block_(block), bound_(bound) {
  check_onebit_block(block);
  TRI_CHECK(warmup_steps >= 1, "parallel.onebit_warmup_steps must be at least 1 (the variance freezes after it), got ",
            warmup_steps);
  MemoryCategoryGuard guard(MemoryCategory::kOptimizerState);
  for (const auto& [name, p] : params_) {
    TRI_CHECK(p.dtype() == DType::kF32 && p.is_contiguous() && p.device().is_cpu(),
              "parallel.grad_compression = onebit_adam steps contiguous f32 host tensors; '", name, "' is ", p.dtype(),
              " on ", p.device());
    const int64_t n = padded(p.numel(), onebit_padding(comm.size(), block));
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
  // Note [1-bit Adam's bounded update]: with bound_, |m^ / (sqrt(v^) + eps)| <= 1.
  const bool bound = bound_;
  auto denominator = [&](float mi, float vi) {
    const float d = std::sqrt(vi) / sqrt_bc2 + eps;
    return bound ? std::max(d, std::abs(mi) / static_cast<float>(bc1)) : d;
  };
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
    onebit_allreduce(comm_, b.flat, b.worker_error, b.server_error, block_);
    float* w = p.data_ptr<float>();
    const float decay = p.dim() >= 2 ? static_cast<float>(1.0 - lr * o.weight_decay) : 1.0f;
    for (int64_t i = 0; i < n; ++i) {
      m[i] = flat[i];
      w[i] = w[i] * decay - step_size * (m[i] / denominator(m[i], v[i]));
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
