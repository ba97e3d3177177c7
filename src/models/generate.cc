#include "models/generate.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "autograd/grad_mode.h"
#include "core/factory.h"
#include "core/views.h"

namespace trident::models {

std::vector<int64_t> generate(const CausalLM& model, const std::vector<int64_t>& prompt, const SampleOptions& options) {
  TRI_CHECK(!prompt.empty(), "generate: the prompt must have at least one token");
  TRI_CHECK(options.temperature >= 0.0, "generate: temperature must be >= 0, got ", options.temperature);
  TRI_CHECK(options.top_k >= 0, "generate: top_k must be >= 0, got ", options.top_k);
  autograd::NoGradGuard no_grad;
  Generator gen(options.seed);
  std::vector<int64_t> tokens = prompt, out;
  const int64_t block = model.model_config().block_size, V = model.model_config().vocab_size;
  for (int64_t n = 0; n < options.max_new_tokens; ++n) {
    const int64_t start = std::max<int64_t>(0, static_cast<int64_t>(tokens.size()) - block);
    const std::vector<int64_t> ctx(tokens.begin() + start, tokens.end());
    const int64_t T = static_cast<int64_t>(ctx.size());
    const Tensor logits = model.forward(core::to_device(from_vector(ctx, Shape{1, T}), model.parameters().front().device()));
    const std::vector<double> last = to_vector<double>(views::select(views::select(logits, 0, 0), 0, T - 1));
    int64_t next;
    if (options.temperature == 0.0) {
      next = std::max_element(last.begin(), last.end()) - last.begin();
    } else {
      std::vector<double> z(last.size());
      for (int64_t v = 0; v < V; ++v) z[v] = last[v] / options.temperature;
      if (options.top_k > 0 && options.top_k < V) {
        std::vector<double> sorted = z;
        std::nth_element(sorted.begin(), sorted.begin() + (options.top_k - 1), sorted.end(), std::greater<>());
        const double kth = sorted[options.top_k - 1];
        for (double& x : z)
          if (x < kth) x = -INFINITY;
      }
      const double m = *std::max_element(z.begin(), z.end());
      double total = 0.0;
      for (double& x : z) total += (x = std::exp(x - m));
      const auto r = philox4x32(gen.seed(), gen.reserve(1));
      double u = uniform_from_bits64(r[0], r[1]) * total;
      // Inverse CDF; rounding can leave u >= 0 at the end: then the last candidate wins.
      next = -1;
      for (int64_t v = 0; v < V; ++v) {
        if (z[v] <= 0.0) continue;
        next = v;
        u -= z[v];
        if (u < 0) break;
      }
    }
    tokens.push_back(next);
    out.push_back(next);
  }
  return out;
}

}  // namespace trident::models
