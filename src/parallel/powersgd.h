// PowerSGD (Vogels et al., "PowerSGD: Practical Low-Rank Gradient Compression for Distributed
// Optimization", 2019) as PyTorch's DDP powerSGD_hook runs it on one bucket:
//
//   before start_step: the plain fp32 all-reduce (the hook's vanilla warm-up iterations);
//   then, per bucket: M += error (error feedback, this rank's own), and for each gradient viewed
//   as a matrix (shape[0], rest) of rank r = min(rows, cols, powersgd_rank):
//     compressed when (rows + cols) * r * 2 < rows * cols (min_compression_rate 2), else it
//       joins the bucket's uncompressed tensors (biases, norm gains: one all-reduce of them);
//     Q: random (seeded alike on every rank) the first time, then last step's Q (warm start),
//       orthogonalised;  P = M Q;  all-reduce P;  orthogonalise P (Gram-Schmidt);
//     Q = M^T P;  all-reduce Q;  Q /= N;  M ~ P Q^T (the mean's approximation);
//   error = (M + error) - the result, over the whole bucket.
//
// Per compressed step a bucket moves 4 (u + sum of (rows + cols) r) bytes, u its uncompressed
// elements, against 4 x its elements for fp32 (formula_bytes()).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "parallel/grad_reducer.h"

namespace trident::parallel {

// Gram-Schmidt on the columns of `m` (rows x cols, row-major, contiguous f32, in place): each
// column normalised, then removed from the later ones; a zero column stays zero (PyTorch's
// orthogonalization_epsilon = 0, whose ZeroDivisionError path fills it with zeros).
void orthogonalize(const Tensor& m);

class PowerSgdReducer final : public GradReducer {
 public:
  PowerSgdReducer(comm::Communicator& comm, int64_t rank, int64_t start_step);

  void prepare(const std::vector<BucketLayout>& buckets) override;
  void set_step(int64_t step) override { step_ = step; }
  std::unique_ptr<comm::Work> start(size_t index, const Tensor& buffer) override;
  // "powersgd.bucket<i>.error" and ".q" of every bucket.
  std::vector<nn::NamedTensor> state() const override;
  void load_state(const std::function<Tensor(const std::string&)>& read, int64_t step) override;

  // Bytes a compressed step hands to all-reduces for bucket `index` (one rank's count).
  int64_t formula_bytes(size_t index) const;
  // The first Q of a matrix with `cols` columns, rank r, in bucket `bucket` (seeded alike on
  // every rank; before orthogonalisation): standard normal values.
  static Tensor initial_q(size_t bucket, size_t matrix, int64_t cols, int64_t r);

 private:
  struct Matrix {
    int64_t offset, rows, cols, r;
    int64_t p_offset, q_offset;  // in the bucket's P and Q memories
  };
  struct Bucket {
    BucketLayout layout;
    std::vector<Matrix> matrices;
    std::vector<std::pair<int64_t, int64_t>> uncompressed;  // (offset, numel)
    int64_t uncompressed_numel = 0, p_numel = 0, q_numel = 0;
    std::optional<Tensor> error, q;  // this rank's error feedback; Q, warm-started
    bool q_ready = false;
  };
  class Work;

  comm::Communicator& comm_;
  const int64_t rank_, start_step_;
  int64_t step_ = 0;
  std::vector<Bucket> buckets_;
  std::unique_ptr<GradReducer> plain_;
};

}  // namespace trident::parallel
