// Batch samplers for language-model training: (input, target) windows of a token file.
//
// A batch is B rows of T tokens; row b's target is its input shifted one token to the left,
// so both come from one window of T + 1 consecutive tokens. Both samplers are pure functions
// of (seed, position): batch_at(p) is the p-th batch, next() returns batch_at(position()) and
// advances. The state to save in a checkpoint is that pair (SamplerState); restore() resumes
// a run exactly, and no result depends on the thread count.
//
// SequentialSampler (issue #3's definition, runs comparable token for token with other
// frameworks):
//   W = (N - 1) / T windows (integer division), window r = tokens[r*T : r*T + T + 1]
//   at step s, row b uses window r = (s*B + b) mod W: input tokens[r*T : r*T + T],
//   target tokens[r*T + 1 : r*T + T + 1].
// Windows have stride T, so consecutive rows read the file front to back and every token is
// a target exactly once per pass; the wrap is per row, so the row after the last complete
// window reads window 0 (a batch may straddle the end). The < T tokens after the last complete
// window are never read. Before the first wrap this is also llm.c's DataLoader order. The same
// in PyTorch:
//   W = (len(tokens) - 1) // T
//   rows = [(s * B + b) % W for b in range(B)]
//   x = torch.stack([tokens[r*T : r*T+T] for r in rows])
//   y = torch.stack([tokens[r*T+1 : r*T+T+1] for r in rows])
//
// RandomSampler (nanoGPT's get_batch): each row starts at an offset drawn uniformly from the
// N - T offsets 0..N-T-1 whose window of T + 1 tokens fits. The offset of row b of batch p
// comes from Philox (core/rng.h) with counter p*B + b and a key derived from `seed` (so it
// never repeats the bits of a Generator given the same seed): 64 random bits w map to
// floor(w * (N - T) / 2^64), whose bias (at most (N - T) / 2^64 per offset) is far below
// anything a training run can detect.
//
// Note [Batch dtype]
// Inputs and targets are i64 tensors of shape (B, T). Targets as i64 are what cross-entropy
// takes (PyTorch's convention, and room for a negative ignore_index), the embedding accepts
// i64 as well, and one dtype for both keeps the model code simple. The cost is nothing that
// matters: B*T*8 bytes per batch (16 KiB at B=8, T=256), against the model's activations.
//
// Not here: distributed sharding of batches across ranks; documents inside a row (the trainer
// finds them from the tokens: ops/documents.h).
// Thread safety: batch_at may be called from many threads; next()/restore() need external
// ordering.
#pragma once

#include <cstdint>
#include <memory>

#include "core/tensor.h"
#include "data/loss_mask.h"
#include "data/token_file.h"

namespace trident::data {

struct Batch {
  Tensor inputs;   // (B, T) i64
  Tensor targets;  // (B, T) i64: inputs shifted left by one token
};

// What a checkpoint stores to resume a sampler: its seed (0 for the sequential sampler) and
// the number of batches drawn so far.
struct SamplerState {
  uint64_t seed = 0;
  int64_t position = 0;
};

class BatchSampler {
 public:
  virtual ~BatchSampler() = default;

  // The batch at `position` (>= 0); does not change the sampler.
  virtual Batch batch_at(int64_t position) const = 0;
  // The batch at position(), then position() + 1.
  Batch next() { return batch_at(state_.position++); }

  int64_t position() const { return state_.position; }
  SamplerState state() const { return state_; }
  // Continues from a saved state: the next batch is the one after the saved run's last.
  void restore(const SamplerState& state);

  int64_t batch_size() const { return B_; }
  int64_t seq_len() const { return T_; }
  const TokenFile& file() const { return *file_; }
  // Targets of tokens the mask does not train on become -1 (data/loss_mask.h); null: every
  // token is a target. Throws when the mask is not the file's size.
  void set_loss_mask(std::shared_ptr<const LossMask> mask);
  const LossMask* loss_mask() const { return mask_.get(); }

 protected:
  // Checks B, T >= 1 and that the file holds at least one window of T + 1 tokens.
  BatchSampler(std::shared_ptr<const TokenFile> file, int64_t B, int64_t T, uint64_t seed,
               const char* what);
  // Fills row b of `batch` from the window starting at token `start`.
  void fill_row(const Batch& batch, int64_t b, int64_t start) const;
  Batch empty_batch() const;

  std::shared_ptr<const TokenFile> file_;
  std::shared_ptr<const LossMask> mask_;
  int64_t B_, T_;
  SamplerState state_;
};

class SequentialSampler final : public BatchSampler {
 public:
  // Throws trident::Error (kValue) naming the file, N and T if no window fits.
  SequentialSampler(std::shared_ptr<const TokenFile> file, int64_t B, int64_t T);
  Batch batch_at(int64_t position) const override;
  // W, the number of complete windows of T + 1 tokens at stride T.
  int64_t num_windows() const { return windows_; }

 private:
  int64_t windows_;
};

class RandomSampler final : public BatchSampler {
 public:
  // Throws trident::Error (kValue) naming the file, N and T if no window fits.
  RandomSampler(std::shared_ptr<const TokenFile> file, int64_t B, int64_t T, uint64_t seed);
  Batch batch_at(int64_t position) const override;
};

}  // namespace trident::data
