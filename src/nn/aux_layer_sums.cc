// Per-layer auxiliary sums: element-wise addition with a checked length.
#include "nn/aux_layer_sums.h"

#include "core/check.h"

namespace trident::nn {

void add_layer_sums(AuxLayerSums& sums, const AuxLayerKey& key, std::span<const double> values) {
  auto [it, added] = sums.try_emplace(key, values.begin(), values.end());
  if (added) return;
  std::vector<double>& total = it->second;
  TRI_CHECK(total.size() == values.size(), "auxiliary sums '", key.name, "' of layer ", key.layer, ": ", values.size(),
            " values added to ", total.size());
  for (size_t i = 0; i < values.size(); ++i) total[i] += values[i];
}

}  // namespace trident::nn
