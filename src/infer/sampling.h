// Choosing the next token from a row of logits, as Hugging Face's generate() and vLLM do:
// repetition penalty (CTRL's: a seen token's logit divided by it when positive, multiplied when
// negative), temperature, top-k, then top-p (the smallest set of the most likely tokens whose
// probability reaches p), then a draw; temperature 0 is greedy (the first largest logit). Draws
// come from Philox by (seed, draw index), so a request's tokens depend only on its seed and
// logits, never on what else is in the batch.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace trident::infer {

struct SamplingParams {
  double temperature = 0.0;         // 0: greedy
  int64_t top_k = 0;                // 0: every token
  double top_p = 1.0;               // 1: every token
  double repetition_penalty = 1.0;  // 1: none
  uint64_t seed = 0;
  // Throws naming the field and what is allowed.
  void validate() const;
};

class TokenSampler {
 public:
  explicit TokenSampler(const SamplingParams& params) : params_(params) { params.validate(); }
  // The next token from `logits` (one vocabulary row), given the tokens seen so far (prompt and
  // generated) for the repetition penalty.
  int64_t next(std::span<const float> logits, const std::vector<int64_t>& seen);

 private:
  SamplingParams params_;
  uint64_t draws_ = 0;
};

}  // namespace trident::infer
