// A token stream with structure for training tests: phrases of 5 tokens drawn by an LCG
// from 8 patterns over a vocabulary of 61, so a tiny GPT's loss can fall within 20 steps.
#pragma once

#include <cstdint>
#include <vector>

namespace trident::testing {

inline std::vector<uint16_t> phrase_corpus(int phrases = 6000) {
  std::vector<uint16_t> tokens;
  uint32_t x = 1;
  for (int i = 0; i < phrases; ++i) {
    x = x * 1103515245u + 12345u;
    const uint16_t phrase = static_cast<uint16_t>((x >> 16) % 8);
    for (uint16_t j = 0; j < 5; ++j) tokens.push_back(static_cast<uint16_t>((phrase * 7 + j * 3) % 61));
  }
  return tokens;
}

}  // namespace trident::testing
