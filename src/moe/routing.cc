#include "moe/routing.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/check.h"

namespace trident::moe {

int64_t expert_capacity(double capacity_factor, int64_t tokens, int64_t k, int64_t experts) {
  TRI_CHECK(capacity_factor >= 0.0 && std::isfinite(capacity_factor), "moe: capacity factor ", capacity_factor,
            " must be finite and >= 0 (0: dropless)");
  if (capacity_factor == 0.0) return 0;
  const double c = std::ceil(capacity_factor * static_cast<double>(tokens * k) / static_cast<double>(experts));
  return std::max<int64_t>(1, static_cast<int64_t>(c));
}

Routing route_top_k(const float* probs, int64_t tokens, int64_t experts, int64_t k, int64_t capacity) {
  TRI_CHECK(experts >= 1 && k >= 1 && k <= experts, "moe: top-k routing needs 1 <= k (", k, ") <= experts (", experts,
            ")");
  TRI_CHECK(tokens >= 0 && capacity >= 0, "moe: ", tokens, " tokens, capacity ", capacity);
  Routing r;
  r.tokens = tokens, r.experts = experts, r.k = k;
  r.expert_of_slot.resize(static_cast<size_t>(tokens * k));
  r.routed.assign(static_cast<size_t>(experts), 0);
  std::vector<int64_t> order(static_cast<size_t>(experts));
  for (int64_t n = 0; n < tokens; ++n) {
    const float* p = probs + n * experts;
    std::iota(order.begin(), order.end(), int64_t{0});
    // Most probable first; ties to the lower index; NaN below everything.
    const auto rank = [p](int64_t e) { return std::isnan(p[e]) ? -std::numeric_limits<float>::infinity() : p[e]; };
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
      const float ra = rank(a), rb = rank(b);
      return ra > rb || (ra == rb && a < b);
    });
    for (int64_t j = 0; j < k; ++j) {
      r.expert_of_slot[static_cast<size_t>(n * k + j)] = order[static_cast<size_t>(j)];
      ++r.routed[static_cast<size_t>(order[static_cast<size_t>(j)])];
    }
  }
  // Counting sort of the slots by expert, token order within each; a full expert drops the rest.
  std::vector<int64_t> kept(static_cast<size_t>(experts), 0);
  for (int64_t e = 0; e < experts; ++e)
    kept[static_cast<size_t>(e)] = capacity > 0 ? std::min(capacity, r.routed[static_cast<size_t>(e)])
                                                : r.routed[static_cast<size_t>(e)];
  r.offsets.assign(static_cast<size_t>(experts + 1), 0);
  for (int64_t e = 0; e < experts; ++e)
    r.offsets[static_cast<size_t>(e + 1)] = r.offsets[static_cast<size_t>(e)] + kept[static_cast<size_t>(e)];
  r.slot_of_row.resize(static_cast<size_t>(r.offsets.back()));
  std::vector<int64_t> next(r.offsets.begin(), r.offsets.end() - 1);
  for (int64_t s = 0; s < tokens * k; ++s) {
    const size_t e = static_cast<size_t>(r.expert_of_slot[static_cast<size_t>(s)]);
    if (next[e] < r.offsets[e + 1]) r.slot_of_row[static_cast<size_t>(next[e]++)] = s;
    else ++r.dropped;
  }
  return r;
}

}  // namespace trident::moe
