#include "infer/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/check.h"
#include "core/rng.h"

namespace trident::infer {

void SamplingParams::validate() const {
  TRI_CHECK(std::isfinite(temperature) && temperature >= 0.0, "sampling: temperature = ", temperature,
            " is invalid: allowed: >= 0 (0: greedy)");
  TRI_CHECK(top_k >= 0, "sampling: top_k = ", top_k, " is invalid: allowed: >= 0 (0: every token)");
  TRI_CHECK(top_p > 0.0 && top_p <= 1.0, "sampling: top_p = ", top_p, " is invalid: allowed: (0, 1]");
  TRI_CHECK(std::isfinite(repetition_penalty) && repetition_penalty > 0.0, "sampling: repetition_penalty = ",
            repetition_penalty, " is invalid: allowed: > 0 (1: none)");
}

int64_t TokenSampler::next(std::span<const float> logits, const std::vector<int64_t>& seen) {
  const auto V = static_cast<int64_t>(logits.size());
  TRI_CHECK(V > 0, "sampling: no logits");
  std::vector<double> z(logits.begin(), logits.end());
  if (params_.repetition_penalty != 1.0) {
    std::vector<bool> done(static_cast<size_t>(V), false);
    for (int64_t t : seen) {
      if (t < 0 || t >= V || done[static_cast<size_t>(t)]) continue;
      done[static_cast<size_t>(t)] = true;
      double& x = z[static_cast<size_t>(t)];
      x = x > 0 ? x / params_.repetition_penalty : x * params_.repetition_penalty;
    }
  }
  if (params_.temperature == 0.0) return std::max_element(z.begin(), z.end()) - z.begin();
  for (double& x : z) x /= params_.temperature;
  // Candidates by falling logit (ties by id), cut by top-k, then by top-p.
  std::vector<int64_t> order(static_cast<size_t>(V));
  std::iota(order.begin(), order.end(), 0);
  const int64_t k = params_.top_k > 0 ? std::min(params_.top_k, V) : V;
  auto by_logit = [&](int64_t a, int64_t b) {
    return z[static_cast<size_t>(a)] > z[static_cast<size_t>(b)] || (z[static_cast<size_t>(a)] == z[static_cast<size_t>(b)] && a < b);
  };
  std::partial_sort(order.begin(), order.begin() + k, order.end(), by_logit);
  order.resize(static_cast<size_t>(k));
  const double top = z[static_cast<size_t>(order[0])];
  std::vector<double> p;
  double total = 0;
  for (int64_t t : order) total += p.emplace_back(std::exp(z[static_cast<size_t>(t)] - top));
  if (params_.top_p < 1.0) {
    double mass = 0;
    size_t keep = 0;
    while (keep < p.size() && mass < params_.top_p * total) mass += p[keep++];
    p.resize(std::max<size_t>(keep, 1));
    total = std::accumulate(p.begin(), p.end(), 0.0);
  }
  const auto r = philox4x32(params_.seed, draws_++);
  double u = uniform_from_bits64(r[0], r[1]) * total;
  for (size_t i = 0; i < p.size(); ++i) {
    u -= p[i];
    if (u < 0) return order[i];
  }
  return order[p.size() - 1];  // rounding left u >= 0: the last candidate
}

}  // namespace trident::infer
