// Per-layer auxiliary sums: vector values a layer records during a step's forwards that add up
// over micro-batches and ranks instead of averaging (nn/aux_outputs.h's scalar values): a
// mixture-of-experts router's tokens per expert and dropped choices, an expert-parallel
// exchange's bytes and seconds. Keyed by (decoder layer, name); a name's vector has the same
// length every time it is recorded (the experts of that layer, or one for a scalar sum).
//
// Not here: recording them (AuxOutputs::add_layer_sums), combining ranks' sums (the trainer).
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace trident::nn {

struct AuxLayerKey {
  int64_t layer = 0;  // the decoder layer's index, as in its parameters' names ("layers.N.")
  std::string name;
  auto operator<=>(const AuxLayerKey&) const = default;
};
using AuxLayerSums = std::map<AuxLayerKey, std::vector<double>>;

// Adds `values` element by element to sums[key] (a new key takes them as they are). Throws
// trident::Error when sums[key] has another length: a caller records one shape per name.
void add_layer_sums(AuxLayerSums& sums, const AuxLayerKey& key, std::span<const double> values);

}  // namespace trident::nn
