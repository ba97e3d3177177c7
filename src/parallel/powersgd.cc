#include "parallel/powersgd.h"

#include <cmath>
#include <random>
#include <string>

#include "core/copy.h"
#include "core/factory.h"
#include "core/profiler.h"
#include "core/views.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/optim.h"

namespace trident::parallel {
namespace {

Tensor matrix_at(const Tensor& flat, int64_t offset, int64_t rows, int64_t cols) {
  return views::view(views::narrow(flat, 0, offset, rows * cols), {rows, cols});
}

}  // namespace

void orthogonalize(const Tensor& m) {
  TRI_CHECK(m.dim() == 2 && m.dtype() == DType::kF32 && m.is_contiguous() && m.device().is_cpu(),
            "orthogonalize: expected a contiguous f32 host matrix, got ", m.dtype(), " ", m.shape());
  const int64_t rows = m.size(0), cols = m.size(1);
  float* a = m.data_ptr<float>();
  for (int64_t i = 0; i < cols; ++i) {
    double sq = 0.0;
    for (int64_t k = 0; k < rows; ++k) sq += static_cast<double>(a[k * cols + i]) * a[k * cols + i];
    const float norm = static_cast<float>(std::sqrt(sq));
    for (int64_t k = 0; k < rows; ++k) a[k * cols + i] = norm > 0.0f ? a[k * cols + i] / norm : 0.0f;
    for (int64_t j = i + 1; j < cols; ++j) {
      double dot = 0.0;
      for (int64_t k = 0; k < rows; ++k) dot += static_cast<double>(a[k * cols + i]) * a[k * cols + j];
      const float d = static_cast<float>(dot);
      for (int64_t k = 0; k < rows; ++k) a[k * cols + j] -= d * a[k * cols + i];
    }
  }
  m.bump_version();
}

Tensor PowerSgdReducer::initial_q(size_t bucket, size_t matrix, int64_t cols, int64_t r) {
  // Box-Muller over the 64-bit Mersenne Twister's raw output: the same values from every
  // standard library (std::normal_distribution's are not specified).
  std::mt19937_64 gen(0x9e3779b97f4a7c15ULL ^ (static_cast<uint64_t>(bucket) << 32) ^ matrix);
  auto uniform = [&] { return (static_cast<double>(gen() >> 11) + 0.5) * (1.0 / 9007199254740992.0); };
  Tensor q = empty({cols, r}, DType::kF32);
  float* out = q.data_ptr<float>();
  for (int64_t i = 0; i < cols * r; ++i) {
    const double u1 = uniform(), u2 = uniform();
    out[i] = static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }
  return q;
}

PowerSgdReducer::PowerSgdReducer(comm::Communicator& comm, int64_t rank, int64_t start_step)
    : comm_(comm), rank_(rank), start_step_(start_step), plain_(mean_reducer(comm)) {
  TRI_CHECK(rank >= 1, "parallel.powersgd_rank must be at least 1, got ", rank);
}

void PowerSgdReducer::prepare(const std::vector<BucketLayout>& buckets) {
  buckets_.clear();
  for (const BucketLayout& layout : buckets) {
    Bucket b;
    b.layout = layout;
    for (size_t k = 0; k < layout.shapes.size(); ++k) {
      const Shape& s = layout.shapes[k];
      const int64_t numel = s.product();
      const int64_t rows = s.size() == 0 ? 1 : s[0], cols = rows == 0 ? 0 : numel / rows;
      const int64_t r = std::min({rows, cols, rank_});
      if ((rows + cols) * r * 2 < rows * cols) {  // PyTorch's _should_compress, min_compression_rate 2
        b.matrices.push_back({layout.offsets[k], rows, cols, r, b.p_numel, b.q_numel});
        b.p_numel += rows * r;
        b.q_numel += cols * r;
      } else {
        b.uncompressed.emplace_back(layout.offsets[k], numel);
        b.uncompressed_numel += numel;
      }
    }
    MemoryCategoryGuard grads(MemoryCategory::kGradient);
    b.error = zeros({layout.numel}, DType::kF32);
    b.q = zeros({std::max<int64_t>(b.q_numel, 1)}, DType::kF32);
    buckets_.push_back(std::move(b));
  }
}

int64_t PowerSgdReducer::formula_bytes(size_t index) const {
  const Bucket& b = buckets_.at(index);
  return 4 * (b.uncompressed_numel + b.p_numel + b.q_numel);
}

// The bucket's reduction after start(): P's (and the uncompressed tensors') all-reduce in
// flight. wait() runs the rest: Q's all-reduce is started there, never from test(), so that
// every rank starts its collectives in the same order (finish() waits in bucket order) whatever
// each rank's timing.
class PowerSgdReducer::Work final : public comm::Work {
 public:
  Work(PowerSgdReducer& owner, Bucket& b, Tensor buffer, Tensor input, Tensor p, Tensor unc,
       std::unique_ptr<comm::Work> unc_work, std::unique_ptr<comm::Work> p_work)
      : owner_(owner), b_(b), buffer_(std::move(buffer)), input_(std::move(input)), p_(std::move(p)),
        unc_(std::move(unc)), unc_work_(std::move(unc_work)), p_work_(std::move(p_work)) {}
  ~Work() override {
    if (!done_) wait();  // never leave a collective of the sequence unstarted
  }

  void wait() override {
    if (done_) return;
    profiler::ProfileScope scope("powersgd", profiler::Phase::kCommunication);
    const double inv = 1.0 / static_cast<double>(owner_.comm_.size());
    if (unc_work_) {
      unc_work_->wait();
      ops::scale_(unc_, inv);
      int64_t at = 0;
      for (const auto& [offset, n] : b_.uncompressed) {
        core::copy_(views::narrow(buffer_, 0, offset, n), views::narrow(unc_, 0, at, n));
        at += n;
      }
    }
    if (p_work_) {
      p_work_->wait();
      for (const Matrix& m : b_.matrices) {
        const Tensor p = matrix_at(p_, m.p_offset, m.rows, m.r);
        orthogonalize(p);
        core::copy_(matrix_at(*b_.q, m.q_offset, m.cols, m.r),
                    ops::matmul(views::transpose(matrix_at(buffer_, m.offset, m.rows, m.cols), 0, 1), p));
      }
      owner_.comm_.all_reduce_async(views::narrow(*b_.q, 0, 0, b_.q_numel), comm::ReduceOp::kSum)->wait();
      ops::scale_(*b_.q, inv);
      for (const Matrix& m : b_.matrices)
        core::copy_(matrix_at(buffer_, m.offset, m.rows, m.cols),
                    ops::matmul(matrix_at(p_, m.p_offset, m.rows, m.r),
                                views::transpose(matrix_at(*b_.q, m.q_offset, m.cols, m.r), 0, 1)));
    }
    // error = what this rank meant to send - what the ranks agreed on.
    const float* in = input_.data_ptr<float>();
    const float* out = buffer_.data_ptr<float>();
    float* e = b_.error->data_ptr<float>();
    for (int64_t i = 0; i < b_.layout.numel; ++i) e[i] = in[i] - out[i];
    b_.error->bump_version();
    done_ = true;
  }
  bool test() override {
    if (done_) return true;
    // Progress only: the next phase starts in wait().
    if (unc_work_) unc_work_->test();
    if (p_work_) p_work_->test();
    return false;
  }

 private:
  PowerSgdReducer& owner_;
  Bucket& b_;
  Tensor buffer_, input_, p_, unc_;
  std::unique_ptr<comm::Work> unc_work_, p_work_;
  bool done_ = false;
};

std::unique_ptr<comm::Work> PowerSgdReducer::start(size_t index, const Tensor& buffer) {
  if (step_ < start_step_) return plain_->start(index, buffer);
  TRI_CHECK(index < buckets_.size(), "PowerSGD: bucket ", index, " was not prepared (", buckets_.size(), " buckets)");
  TRI_CHECK(buffer.device().is_cpu(), "parallel.grad_compression = powersgd runs on host tensors; the gradients are on ",
            buffer.device());
  profiler::ProfileScope scope("powersgd", profiler::Phase::kCommunication);
  Bucket& b = buckets_[index];
  TRI_CHECK(buffer.numel() == b.layout.numel, "PowerSGD: bucket ", index, " has ", buffer.numel(),
            " elements; prepared with ", b.layout.numel);
  ops::add_(buffer, *b.error);
  const Tensor input = core::clone(buffer);
  std::unique_ptr<comm::Work> unc_work, p_work;
  Tensor unc = empty({std::max<int64_t>(b.uncompressed_numel, 1)}, DType::kF32);
  if (b.uncompressed_numel > 0) {
    int64_t at = 0;
    for (const auto& [offset, n] : b.uncompressed) {
      core::copy_(views::narrow(unc, 0, at, n), views::narrow(buffer, 0, offset, n));
      at += n;
    }
    unc_work = comm_.all_reduce_async(views::narrow(unc, 0, 0, b.uncompressed_numel), comm::ReduceOp::kSum);
  }
  Tensor p = empty({std::max<int64_t>(b.p_numel, 1)}, DType::kF32);
  if (!b.matrices.empty()) {
    for (size_t k = 0; k < b.matrices.size(); ++k) {
      const Matrix& m = b.matrices[k];
      const Tensor q = matrix_at(*b.q, m.q_offset, m.cols, m.r);
      if (!b.q_ready) core::copy_(q, initial_q(index, k, m.cols, m.r));
      orthogonalize(q);
      core::copy_(matrix_at(p, m.p_offset, m.rows, m.r), ops::matmul(matrix_at(buffer, m.offset, m.rows, m.cols), q));
    }
    b.q_ready = true;
    p_work = comm_.all_reduce_async(views::narrow(p, 0, 0, b.p_numel), comm::ReduceOp::kSum);
  }
  return std::make_unique<Work>(*this, b, buffer, input, p, unc, std::move(unc_work), std::move(p_work));
}

std::vector<nn::NamedTensor> PowerSgdReducer::state() const {
  std::vector<nn::NamedTensor> out;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    const std::string name = "powersgd.bucket" + std::to_string(i);
    out.emplace_back(name + ".error", *buckets_[i].error);
    out.emplace_back(name + ".q", *buckets_[i].q);
  }
  return out;
}

void PowerSgdReducer::load_state(const std::function<Tensor(const std::string&)>& read, int64_t step) {
  for (size_t i = 0; i < buckets_.size(); ++i) {
    Bucket& b = buckets_[i];
    const std::string name = "powersgd.bucket" + std::to_string(i);
    for (auto [suffix, dst] : {std::pair<const char*, Tensor*>{".error", &*b.error}, {".q", &*b.q}}) {
      const Tensor t = read(name + suffix);
      TRI_CHECK(t.numel() == dst->numel(), "PowerSGD state '", name, suffix, "' has ", t.numel(),
                " elements; this run's bucket needs ", dst->numel(), " (other parallel.bucket_mb or model?)");
      core::copy_(*dst, views::view(core::contiguous(t), dst->shape().span()));
    }
    b.q_ready = step > start_step_;
  }
}

}  // namespace trident::parallel
