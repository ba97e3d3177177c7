// 1-bit Adam (Tang et al., "1-bit Adam: Communication Efficient Large-Scale Training with
// Adam's Convergence Speed", 2021) as DeepSpeed's OnebitAdam runs it over data parallelism:
//
//   warm-up (parallel.onebit_warmup_steps): AdamW on all-reduced gradients, as without it;
//   then the variance v freezes, gradients are no longer all-reduced, and each step
//     m = beta1 m + (1 - beta1) g          (g: this rank's own gradient, clipped locally)
//     m = onebit_allreduce(m)              (the ranks' mean, compressed to signs)
//     p -= lr (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^W)) + eps), plus AdamW's decay.
//
// onebit_allreduce is DeepSpeed's compressed_allreduce, run per parameter as its OnebitAdam
// does (each tensor's momentum with its own scales): as a worker each rank adds its worker
// error to its buffer, sends the signs of each rank's chunk (0 counts as +) with one scale,
// ||x|| / sqrt(n), and keeps what the signs missed as its new worker error; as the server of its
// own chunk it averages the ranks' scaled signs, adds its server error, and sends the signs of
// that with one scale per chunk back to every rank (server error as for the worker).
//
// Note [1-bit Adam's bias correction and clipping]
// DeepSpeed's OnebitAdam has no bias correction; here the warm-up is trident's AdamW (with
// it), so the compressed phase keeps AdamW's corrections: the momentum's goes on with the step
// count, the variance's freezes with the variance, at W = the warm-up's steps. After the
// warm-up the gradient clip measures this rank's own gradient (no collective; DeepSpeed's
// engine clips the local gradients there too), so the grad_norm reported is rank 0's.
//
// Note [1-bit Adam's block scales]
// One scale per buffer and per chunk (DeepSpeed's compressed_allreduce; parallel.onebit_block =
// 0) gives every element of a tensor the same magnitude. GPT-2's tied 50k-token embedding
// holds rows whose variance froze near zero (tokens rare or absent in the warm-up): measured on
// the tiny config, frozen at step 100, the embedding's steps after the freeze had an RMS of 37
// x lr where AdamW on the same rank's gradient had 1.5 (rows of rare tokens stepped by the
// frequent rows' scale over their own tiny sqrt(v)). With a scale per block of onebit_block
// elements (a multiple of 32; one 4-byte scale per block in each exchange), a row is sent at
// its own magnitude: RMS 0.8 on the same step.
//
// Note [1-bit Adam's bounded update]
// Block scales do not help an element that gets its first real gradient after the freeze: its
// frozen v stays ~1e-13 and m / sqrt(v) reaches 1e3 (measured: frozen at step 200 of the tiny
// config, rows of tokens first met later; the loss spikes). parallel.onebit_bound_update
// steps such an element by at most lr: the denominator is max(sqrt(v^) + eps, |m^|), so
// |update| <= lr, which AdamW's own ratio respects for a settled variance (|m^| <= sqrt(v^)
// when the gradient's sign is steady), and elements with a settled variance step as before.
// It is not in DeepSpeed (whose exp_avg_mask zeroes rows the user names, and whose 0/1 Adam
// refreshes the variance with full-precision all-reduces); it needs no communication, and
// every rank applies it to the same averaged momentum, so the replicas stay equal.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "comm/communicator.h"
#include "nn/module.h"
#include "optim/adamw.h"

namespace trident::parallel {

// The elements a compressed buffer is padded to a multiple of: a block (or 32 signs to a word)
// per rank.
int64_t onebit_padding(int ranks, int64_t block);
// Refuses a block that is not 0 or a positive multiple of 32.
void check_onebit_block(int64_t block);

// Averages `x` over `comm` as 1-bit Adam exchanges momentum (flat f32; numel a multiple of
// onebit_padding). `worker_error`: x's size; `server_error`: numel / ranks; both this rank's,
// updated. `block`: elements per scale (0: one per worker buffer and one per server chunk, as
// DeepSpeed). Hands the communicator 2 (numel / 8 + 4 scales) bytes: an all-to-all and an
// all-gather of packed signs with their scales (scales: ranks, or numel / block).
void onebit_allreduce(comm::Communicator& comm, const Tensor& x, const Tensor& worker_error, const Tensor& server_error,
                      int64_t block);

class OnebitAdam {
 public:
  // `adam`: the AdamW that steps the warm-up (its m and v become 1-bit Adam's), over `params`.
  OnebitAdam(std::vector<nn::NamedTensor> params, optim::AdamW& adam, comm::Communicator& comm, int64_t warmup_steps,
             int64_t block, bool bound);

  // Whether the next step is compressed (its gradients stay local).
  bool compressing() const { return step_ >= warmup_; }
  // A warm-up step: the AdamW steps (the caller's), this counts it.
  void count_warmup_step() { ++step_; }
  // A compressed step with learning rate lr, from this rank's gradients.
  void step(double lr);
  int64_t step_count() const { return step_; }
  // This rank's error feedback: "onebit.<param>.worker_error", "onebit.<param>.server_error".
  std::vector<nn::NamedTensor> state() const;
  void load_state(const std::function<Tensor(const std::string&)>& read, int64_t step);

 private:
  std::vector<nn::NamedTensor> params_;
  optim::AdamW& adam_;
  comm::Communicator& comm_;
  const int64_t warmup_;
  const int64_t block_;
  const bool bound_;
  int64_t step_ = 0;
  struct Buffers {
    Tensor flat, worker_error, server_error;  // per parameter, padded to onebit_padding
  };
  std::vector<Buffers> buffers_;
};

}  // namespace trident::parallel
