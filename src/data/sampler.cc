// The sequential and random batch samplers (see sampler.h for the definitions).
#include "data/sampler.h"

#include "core/check.h"
#include "core/factory.h"
#include "core/host_memory.h"
#include "core/rng.h"

namespace trident::data {

BatchSampler::BatchSampler(std::shared_ptr<const TokenFile> file, int64_t B, int64_t T,
                           uint64_t seed, const char* what)
    : file_(std::move(file)), B_(B), T_(T), state_{seed, 0} {
  TRI_CHECK(file_ != nullptr, what, ": no token file");
  TRI_CHECK(B >= 1 && T >= 1, what, ": batch size B and sequence length T must be >= 1, got B=", B,
            " T=", T);
  // B and T can come from a flag: a product past int64 wrapped to a small batch buffer that
  // the sampler then overran. A batch whose ids and targets alone exceed the machine's memory
  // is refused here, with the sizes, rather than failing inside the allocator.
  int64_t tokens = 0, bytes = 0;
  const double memory = host_memory_bytes();
  TRI_CHECK(!__builtin_mul_overflow(B, T, &tokens) && !__builtin_mul_overflow(tokens, int64_t{16}, &bytes) &&
                (memory == 0 || static_cast<double>(bytes) <= memory),  // 0: unknown
            what, ": a batch of B=", B, " sequences of T=", T, " tokens needs ", static_cast<double>(B) * T * 16.0,
            " bytes for its ids and targets alone, more than this machine's memory (", memory,
            " bytes); use a smaller batch size or sequence length");
  TRI_CHECK(file_->size() >= T + 1, what, ": token file ", file_->name(), " has ", file_->size(),
            " tokens, fewer than one window of T + 1 = ", T + 1,
            " tokens (input and target); use a shorter sequence length or more data");
}

void BatchSampler::restore(const SamplerState& state) {
  TRI_CHECK(state.position >= 0, "sampler restore: position must be >= 0, got ", state.position);
  state_ = state;
}

Batch BatchSampler::empty_batch() const {
  return Batch{empty({B_, T_}, DType::kI64), empty({B_, T_}, DType::kI64)};
}

void BatchSampler::fill_row(const Batch& batch, int64_t b, int64_t start) const {
  TRI_ASSERT(start >= 0 && start + T_ + 1 <= file_->size(), "window at ", start,
             " does not fit in ", file_->size(), " tokens");
  int64_t* x = batch.inputs.data_ptr<int64_t>() + b * T_;
  int64_t* y = batch.targets.data_ptr<int64_t>() + b * T_;
  file_->read(start, T_, x);
  file_->read(start + 1, T_, y);
  if (mask_)
    for (int64_t i = 0; i < T_; ++i)
      if (!mask_->trains(start + 1 + i)) y[i] = -1;  // cross-entropy's ignore index
}

void BatchSampler::set_loss_mask(std::shared_ptr<const LossMask> mask) {
  TRI_CHECK(!mask || mask->size() == file_->size(), "the loss mask ", mask ? mask->name() : "", " has ",
            mask ? mask->size() : 0, " entries for the ", file_->size(), " tokens of ", file_->name());
  mask_ = std::move(mask);
}

SequentialSampler::SequentialSampler(std::shared_ptr<const TokenFile> file, int64_t B, int64_t T)
    : BatchSampler(std::move(file), B, T, /*seed=*/0, "SequentialSampler"),
      windows_((file_->size() - 1) / T) {}

Batch SequentialSampler::batch_at(int64_t position) const {
  TRI_CHECK(position >= 0, "SequentialSampler: position must be >= 0, got ", position);
  Batch batch = empty_batch();
  // r = (s*B + b) mod W, computed without overflow for any s.
  const auto W = static_cast<unsigned __int128>(windows_);
  const unsigned __int128 first = static_cast<unsigned __int128>(position) * B_ % W;
  for (int64_t b = 0; b < B_; ++b) {
    const auto r = static_cast<int64_t>((first + static_cast<unsigned __int128>(b)) % W);
    fill_row(batch, b, r * T_);
  }
  return batch;
}

namespace {

// The Philox key of a random sampler: its seed xor a tag ("sampler!" in ASCII), through
// splitmix64's finalizer, so that a sampler and a Generator given the same seed (say, the
// model's init) draw unrelated bits.
uint64_t sampler_key(uint64_t seed) {
  uint64_t z = seed ^ 0x73616d706c657221ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

RandomSampler::RandomSampler(std::shared_ptr<const TokenFile> file, int64_t B, int64_t T,
                             uint64_t seed)
    : BatchSampler(std::move(file), B, T, seed, "RandomSampler") {}

Batch RandomSampler::batch_at(int64_t position) const {
  TRI_CHECK(position >= 0, "RandomSampler: position must be >= 0, got ", position);
  Batch batch = empty_batch();
  const auto offsets = static_cast<unsigned __int128>(file_->size() - T_);  // starts 0..N-T-1
  for (int64_t b = 0; b < B_; ++b) {
    const auto counter =
        static_cast<uint64_t>(position) * static_cast<uint64_t>(B_) + static_cast<uint64_t>(b);
    const std::array<uint32_t, 4> r = philox4x32(sampler_key(state_.seed), counter);
    const uint64_t bits = (static_cast<uint64_t>(r[0]) << 32) | r[1];
    fill_row(batch, b, static_cast<int64_t>((bits * offsets) >> 64));
  }
  return batch;
}

}  // namespace trident::data
