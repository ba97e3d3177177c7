// moe::SparseMoe against a float64 per-token reference written here: each token through its k
// experts (Mixtral's and Qwen2-MoE's math), weighted by its renormalised (or raw) top-k router
// probabilities, a capacity dropping choices in token order, a sigmoid-gated shared expert;
// its output and every gradient (inputs, router, experts, shared expert) with the
// load-balancing and z losses added through nn::AuxOutputs, the gradients against central
// finite differences of the reference objective (the routing is locally constant, so the
// differences see the router only through the chosen probabilities, as the gradient does).
// Also the routing itself: top-k order, ties, capacity, errors.
#include "moe/sparse_moe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "core/factory.h"
#include "core/rng.h"
#include "moe/routing.h"
#include "nn/init.h"

namespace trident::moe {
namespace {

using Values = std::vector<double>;

// Every parameter of a SparseMoe, by name, as doubles, plus the input.
struct Point {
  std::vector<std::pair<std::string, Values>> params;
  Values x;
  const Values& at(const std::string& name) const {
    for (const auto& [n, v] : params)
      if (n == name) return v;
    ADD_FAILURE() << "no parameter " << name;
    static const Values none;
    return none;
  }
};

struct Objective {
  Values y;            // (N, C)
  double balance = 0;  // E sum f P
  double z = 0;        // mean lse^2
  double total = 0;    // sum(y * R) + aux_coef balance + z_coef z
};

double silu(double v) { return v / (1.0 + std::exp(-v)); }

// y = W x for W (out, in) row-major.
Values matvec(const Values& w, const double* x, int64_t out, int64_t in) {
  Values y(static_cast<size_t>(out), 0.0);
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i) y[static_cast<size_t>(o)] += w[static_cast<size_t>(o * in + i)] * x[i];
  return y;
}

Values swiglu_mlp(const Point& p, const std::string& prefix, const char* gate, const char* up, const char* down,
                  const double* x, int64_t C, int64_t I) {
  const Values g = matvec(p.at(prefix + gate + ".weight"), x, I, C), u = matvec(p.at(prefix + up + ".weight"), x, I, C);
  Values h(static_cast<size_t>(I));
  for (size_t i = 0; i < h.size(); ++i) h[i] = silu(g[i]) * u[i];
  return matvec(p.at(prefix + down + ".weight"), h.data(), C, I);
}

// The float64 reference, token by token.
Objective reference(const MoeConfig& cfg, const Point& p, int64_t N, const Values& R) {
  const int64_t C = cfg.hidden, E = cfg.experts, k = cfg.top_k;
  const bool mixtral = cfg.naming == MoeNaming::kMixtral;
  const char* g = mixtral ? "w1" : "gate_proj";
  const char* u = mixtral ? "w3" : "up_proj";
  const char* d = mixtral ? "w2" : "down_proj";
  const int64_t capacity = expert_capacity(cfg.capacity_factor, N, k, E);
  Objective o;
  o.y.assign(static_cast<size_t>(N * C), 0.0);
  std::vector<int64_t> used(static_cast<size_t>(E), 0), routed(static_cast<size_t>(E), 0);
  Values mean_p(static_cast<size_t>(E), 0.0);
  for (int64_t n = 0; n < N; ++n) {
    const double* x = p.x.data() + n * C;
    const Values logits = matvec(p.at("gate.weight"), x, E, C);
    const double mx = *std::max_element(logits.begin(), logits.end());
    double s = 0.0;
    for (double l : logits) s += std::exp(l - mx);
    const double lse = mx + std::log(s);
    o.z += lse * lse / static_cast<double>(N);
    Values prob(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e) {
      prob[static_cast<size_t>(e)] = std::exp(logits[static_cast<size_t>(e)] - lse);
      mean_p[static_cast<size_t>(e)] += prob[static_cast<size_t>(e)] / static_cast<double>(N);
    }
    std::vector<int64_t> order(static_cast<size_t>(E));
    std::iota(order.begin(), order.end(), int64_t{0});
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return prob[a] > prob[b]; });
    double norm = 0.0;
    for (int64_t j = 0; j < k; ++j) norm += prob[static_cast<size_t>(order[static_cast<size_t>(j)])];
    for (int64_t j = 0; j < k; ++j) {
      const int64_t e = order[static_cast<size_t>(j)];
      ++routed[static_cast<size_t>(e)];
      if (capacity > 0 && used[static_cast<size_t>(e)] >= capacity) continue;  // dropped
      ++used[static_cast<size_t>(e)];
      const double w = prob[static_cast<size_t>(e)] / (cfg.norm_topk_prob ? norm : 1.0);
      const Values y = swiglu_mlp(p, "experts." + std::to_string(e) + ".", g, u, d, x, C, cfg.expert_intermediate);
      for (int64_t c = 0; c < C; ++c) o.y[static_cast<size_t>(n * C + c)] += w * y[static_cast<size_t>(c)];
    }
    if (cfg.shared_intermediate > 0) {
      const Values y = swiglu_mlp(p, "shared_expert.", "gate_proj", "up_proj", "down_proj", x, C, cfg.shared_intermediate);
      const double gate = 1.0 / (1.0 + std::exp(-matvec(p.at("shared_expert_gate.weight"), x, 1, C)[0]));
      for (int64_t c = 0; c < C; ++c) o.y[static_cast<size_t>(n * C + c)] += gate * y[static_cast<size_t>(c)];
    }
  }
  for (int64_t e = 0; e < E; ++e)
    o.balance += static_cast<double>(E) * (static_cast<double>(routed[static_cast<size_t>(e)]) / static_cast<double>(N)) *
                 mean_p[static_cast<size_t>(e)];
  for (size_t i = 0; i < o.y.size(); ++i) o.total += o.y[i] * R[i];
  o.total += cfg.aux_loss_coef / static_cast<double>(cfg.moe_layers) * o.balance +
             cfg.z_loss_coef / static_cast<double>(cfg.moe_layers) * o.z;
  return o;
}

Values values_of(const Tensor& t) {
  const std::vector<float> v = to_vector<float>(t);
  return Values(v.begin(), v.end());
}

struct Case {
  std::string name;
  MoeConfig cfg;
};

MoeConfig base(int64_t k) {
  MoeConfig c;
  c.hidden = 8, c.experts = 4, c.top_k = k, c.expert_intermediate = 6;
  c.aux_loss_coef = 0.7, c.z_loss_coef = 0.3, c.moe_layers = 2;
  return c;
}

std::vector<Case> cases() {
  std::vector<Case> out;
  out.push_back({"top-1", base(1)});
  out.push_back({"top-2 renormalised", base(2)});
  MoeConfig raw = base(2);
  raw.norm_topk_prob = false;
  out.push_back({"top-2 raw weights", raw});
  MoeConfig drop = base(2);
  drop.capacity_factor = 0.5;  // capacity ceil(0.5 * 12 * 2 / 4) = 3 of the 6 choices an expert gets on average
  out.push_back({"top-2 with dropping", drop});
  MoeConfig drop1 = base(1);
  drop1.capacity_factor = 1.0;
  out.push_back({"top-1 with dropping", drop1});
  MoeConfig shared = base(2);
  shared.naming = MoeNaming::kQwen2Moe, shared.norm_topk_prob = false, shared.shared_intermediate = 5;
  out.push_back({"top-2 with a shared expert (Qwen2-MoE)", shared});
  return out;
}

constexpr int64_t kTokens = 12;

TEST(SparseMoe, OutputAndGradientsMatchTheFloat64PerTokenReference) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    nn::AuxOutputs aux;
    SparseMoe moe(c.cfg, &aux);
    Generator gen(5);
    Point p;
    {
      autograd::NoGradGuard no_grad;
      for (auto& [name, t] : moe.named_parameters()) {
        nn::init_normal_(t, gen, 0.0, name == "gate.weight" ? 1.0 : 0.4);
        p.params.emplace_back(name, values_of(t));
      }
    }
    Tensor x = randn({3, kTokens / 3, c.cfg.hidden}, gen);  // (B, T, C): the block's shape
    x.set_requires_grad(true);
    p.x = values_of(x);
    const Tensor R = randn({3, kTokens / 3, c.cfg.hidden}, gen);
    const Values r = values_of(R);

    aux.set_loss_seed(1.0);
    const Tensor y = moe.forward(x);
    autograd::backward(trident::sum(y * R));
    const Objective ref = reference(c.cfg, p, kTokens, r);

    // Output.
    const Values got = values_of(y);
    ASSERT_EQ(got.size(), ref.y.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], ref.y[i], 2e-5 * (1.0 + std::abs(ref.y[i]))) << i;
    const Routing& routing = moe.last_routing();
    if (c.cfg.capacity_factor > 0) EXPECT_GT(routing.dropped, 0) << "the case should drop some choices";
    else EXPECT_EQ(routing.dropped, 0);
    // The losses, recorded without their coefficients.
    const nn::AuxValues v = aux.take();
    EXPECT_NEAR(v.at("moe_aux_loss").sum, ref.balance, 1e-5 * ref.balance);
    EXPECT_NEAR(v.at("moe_z_loss").sum, ref.z, 1e-5 * ref.z);
    EXPECT_EQ(v.at("moe_dropped").sum, static_cast<double>(routing.dropped));

    // Gradients against central differences of the reference objective.
    auto check = [&](const std::string& what, Values& values, const Tensor& grad) {
      const Values g = values_of(grad);
      for (size_t i = 0; i < values.size(); ++i) {
        const double h = 1e-6, v0 = values[i];
        values[i] = v0 + h;
        const double up = reference(c.cfg, p, kTokens, r).total;
        values[i] = v0 - h;
        const double down = reference(c.cfg, p, kTokens, r).total;
        values[i] = v0;
        const double fd = (up - down) / (2 * h);
        EXPECT_NEAR(g[i], fd, 1e-4 * (1.0 + std::abs(fd))) << what << " element " << i;
      }
    };
    ASSERT_TRUE(x.grad().has_value());
    check("input", p.x, *x.grad());
    for (auto& [name, t] : moe.named_parameters()) {
      ASSERT_TRUE(t.grad().has_value()) << name << " got no gradient";
      for (auto& [n, vals] : p.params)
        if (n == name) check(name, vals, *t.grad());
    }
  }
}

TEST(SparseMoe, AnExpertNoTokenChoseGetsAZeroGradient) {
  MoeConfig cfg = base(1);
  SparseMoe moe(cfg, nullptr);
  {
    autograd::NoGradGuard no_grad;
    Generator gen(3);
    for (auto& [name, t] : moe.named_parameters()) nn::init_normal_(t, gen, 0.0, 0.3);
    // Expert 3's router row -5 against positive inputs: no token picks it.
    Tensor gate = moe.named_parameters().front().second;
    std::vector<float> w = to_vector<float>(gate);
    for (int64_t c = 0; c < cfg.hidden; ++c) w[static_cast<size_t>(3 * cfg.hidden + c)] = -5.0f;
    gate.set_data(from_vector(w, gate.shape()));
  }
  Generator gen(4);
  std::vector<float> xs = to_vector<float>(randn({kTokens, cfg.hidden}, gen));
  for (float& v : xs) v = std::abs(v);
  const Tensor x = from_vector(xs, {kTokens, cfg.hidden});
  const Tensor y = moe.forward(x);
  autograd::backward(trident::sum(y));
  const Routing& r = moe.last_routing();
  ASSERT_EQ(r.kept(3), 0);
  for (int64_t e = 0; e < cfg.experts; ++e)
    if (r.kept(e) == 0)
      for (const auto& [name, t] : moe.named_parameters())
        if (name.starts_with("experts." + std::to_string(e) + ".")) {
          ASSERT_TRUE(t.grad().has_value()) << name;
          for (float g : to_vector<float>(*t.grad())) EXPECT_EQ(g, 0.0f) << name;
        }
}

TEST(SparseMoe, EvaluationIsDroplessAndNoTokensAddNoLoss) {
  MoeConfig cfg = base(2);
  cfg.capacity_factor = 0.5;
  nn::AuxOutputs aux;
  SparseMoe moe(cfg, &aux);
  Generator gen(6);
  const Tensor x = randn({kTokens, cfg.hidden}, gen);
  autograd::NoGradGuard no_grad;
  (void)moe.forward(x);
  EXPECT_GT(moe.last_routing().dropped, 0);  // training: the capacity drops
  moe.eval();
  (void)moe.forward(x);
  EXPECT_EQ(moe.last_routing().dropped, 0);  // evaluation and generation: dropless
  (void)aux.take();
  const Tensor none = moe.forward(zeros({0, cfg.hidden}));
  EXPECT_EQ(none.shape(), Shape({0, cfg.hidden}));
  EXPECT_TRUE(aux.take().empty());  // no NaN mean over no tokens
}

TEST(Routing, TopKMostProbableFirstTiesToTheLowerExpert) {
  const std::vector<float> probs = {0.1f, 0.4f, 0.4f, 0.1f,   // token 0: a tie between 1 and 2
                                    0.7f, 0.1f, 0.05f, 0.15f};  // token 1
  const Routing r = route_top_k(probs.data(), 2, 4, 2, 0);
  EXPECT_EQ(r.expert_of_slot, (std::vector<int64_t>{1, 2, 0, 3}));
  EXPECT_EQ(r.offsets, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(r.slot_of_row, (std::vector<int64_t>{2, 0, 1, 3}));
  EXPECT_EQ(r.routed, (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(r.dropped, 0);
}

TEST(Routing, ACapacityKeepsTheFirstTokensInOrderAndCountsTheRest) {
  // Five tokens all prefer expert 0, then 1.
  std::vector<float> probs;
  for (int n = 0; n < 5; ++n) probs.insert(probs.end(), {0.6f, 0.3f, 0.1f});
  const int64_t capacity = expert_capacity(1.0, 5, 1, 3);  // ceil(5 / 3) = 2
  EXPECT_EQ(capacity, 2);
  const Routing r = route_top_k(probs.data(), 5, 3, 1, capacity);
  EXPECT_EQ(r.routed, (std::vector<int64_t>{5, 0, 0}));
  EXPECT_EQ(r.offsets, (std::vector<int64_t>{0, 2, 2, 2}));
  EXPECT_EQ(r.slot_of_row, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(r.dropped, 3);
  EXPECT_EQ(expert_capacity(0.0, 5, 1, 3), 0);  // dropless
}

TEST(Routing, ANaNRanksLastAndBadArgumentsAreClearErrors) {
  const std::vector<float> probs = {std::nanf(""), 0.1f, 0.25f, 0.25f};
  // NaN below everything, ties to the lower index: the same choice on every rank.
  EXPECT_EQ(route_top_k(probs.data(), 1, 4, 2, 0).expert_of_slot, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(route_top_k(probs.data(), 2, 2, 1, 0).expert_of_slot, (std::vector<int64_t>{1, 0}));
  EXPECT_THROW(route_top_k(probs.data(), 1, 4, 5, 0), std::exception);
  EXPECT_THROW(expert_capacity(-1.0, 4, 1, 2), std::exception);
}

}  // namespace
}  // namespace trident::moe
