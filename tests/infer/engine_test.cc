// Generation with a KV cache (infer/engine.h): greedy tokens equal those of generation that
// reruns the whole context each step (models/generate.h, no cache) for GPT-2, LLaMA with
// grouped-query attention and LLaMA with a sliding window shorter than the context; a batch of
// prompts of different lengths, more than the batch holds (so requests join as others leave),
// gives each request what it gives alone, greedy and sampled; stop tokens, max_tokens and a full
// context end a request as OpenAI's API says; bad requests are refused, naming the request.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>

#include "autograd/grad_mode.h"
#include "core/factory.h"
#include "core/parallel.h"
#include "infer/engine.h"
#include "infer/kv_cache.h"
#include "models/generate.h"
#include "models/registry.h"
#include "requests.h"
#include "support/error_of.h"
#include "support/tiny_model_configs.h"

namespace trident::infer {
namespace {

using testing::greedy;
using testing::prompt_of;
using trident::testing::error_of;
using models::testing::with_context;

std::vector<models::ModelConfig> families() {
  models::ModelConfig window = models::testing::tiny_llama(false);
  window.family_values["sliding_window"] = int64_t{8};
  return {with_context(models::testing::tiny_gpt2(), 64), with_context(models::testing::tiny_llama(true), 64),
          with_context(window, 64), with_context(models::testing::tiny_mixtral(), 64),
          with_context(models::testing::tiny_qwen2_moe(), 64)};
}


// r sampled (temperature, top-k, top-p, a repetition penalty) from its own seed.
GenerationRequest sampled(GenerationRequest r, uint64_t seed) {
  r.sampling.temperature = 0.9;
  r.sampling.top_k = 8;
  r.sampling.top_p = 0.9;
  r.sampling.repetition_penalty = 1.2;
  r.sampling.seed = seed;
  return r;
}

// The requests through an engine of max_batch slots: each gets the tokens it gets alone.
std::vector<GenerationResult> expect_each_as_alone(const models::CausalLM& model,
                                                   const std::vector<GenerationRequest>& requests, int64_t max_batch,
                                                   const std::string& arch) {
  Engine batched(model, {.max_batch = max_batch});
  const std::vector<GenerationResult> together = batched.generate(requests);
  Engine single(model, {.max_batch = 1});
  for (size_t i = 0; i < requests.size(); ++i)
    EXPECT_EQ(together[i].tokens, single.generate({requests[i]})[0].tokens) << arch << " request " << i;
  return together;
}

TEST(Engine, GreedyTokensEqualGenerationWithoutACache) {
  for (const models::ModelConfig& c : families()) {
    const auto model = models::build_model(c);
    model->eval();
    Engine engine(*model, {});
    for (int64_t n : {1, 5, 17}) {
      const std::vector<int64_t> prompt = prompt_of(n, 10 + static_cast<uint64_t>(n));
      models::SampleOptions uncached;
      uncached.max_new_tokens = 30;
      uncached.temperature = 0.0;
      const std::vector<int64_t> want = models::generate(*model, prompt, uncached);
      const GenerationResult got = engine.generate({greedy(prompt, 30)})[0];
      EXPECT_EQ(got.tokens, want) << c.arch << " prompt of " << n;
      EXPECT_EQ(got.finish_reason, "length");
      EXPECT_EQ(got.prompt_tokens, n);
    }
  }
}

// Decode steps on fewer threads (Note [Decode threads]) give the same tokens, and the process's
// thread count is back afterwards; a negative count is refused naming the option.
TEST(Engine, DecodeThreadsChangeNoTokenAndAreRestored) {
  const int threads = num_threads();
  set_num_threads(2);
  for (const models::ModelConfig& c : families()) {
    const auto model = models::build_model(c);
    model->eval();
    std::vector<GenerationRequest> requests;
    for (int64_t i = 0; i < 3; ++i)
      requests.push_back(sampled(greedy(prompt_of(3 + 4 * i, 40 + static_cast<uint64_t>(i)), 12), static_cast<uint64_t>(i)));
    Engine two(*model, {.max_batch = 3});
    Engine one(*model, {.max_batch = 3, .decode_threads = 1});
    const std::vector<GenerationResult> a = two.generate(requests), b = one.generate(requests);
    for (size_t i = 0; i < requests.size(); ++i) EXPECT_EQ(a[i].tokens, b[i].tokens) << c.arch << " request " << i;
    EXPECT_EQ(num_threads(), 2);
  }
  set_num_threads(threads);
  const auto model = models::build_model(families().front());
  try {
    Engine bad(*model, {.decode_threads = -1});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("decode_threads = -1"), std::string::npos) << e.what();
  }
}

TEST(Engine, ABatchOfMixedPromptsGivesWhatEachGivesAlone) {
  for (const models::ModelConfig& c : families()) {
    const auto model = models::build_model(c);
    model->eval();
    std::vector<GenerationRequest> requests;
    for (int64_t i = 0; i < 5; ++i) {
      const GenerationRequest r = greedy(prompt_of(1 + 7 * i % 20, 100 + static_cast<uint64_t>(i)), 6 + 5 * i);
      requests.push_back(i % 2 == 1 ? sampled(r, static_cast<uint64_t>(i)) : r);
    }
    const std::vector<GenerationResult> together = expect_each_as_alone(*model, requests, 3, c.arch);
    for (size_t i = 0; i < requests.size(); ++i)
      EXPECT_EQ(static_cast<int64_t>(together[i].tokens.size()), requests[i].max_tokens) << c.arch << " request " << i;
    Engine single(*model, {.max_batch = 1});
    // Another seed draws other tokens.
    GenerationRequest other = requests[1];
    other.sampling.seed = 99;
    EXPECT_NE(single.generate({other})[0].tokens, together[1].tokens) << c.arch;
  }
}

// Prompts of one length admitted together are read in one batched prefill (Note [Batched
// prefill]): each row's logits equal its prompt's alone bit for bit, and the engine's tokens
// equal each request's alone, greedy and sampled, with runs of equal lengths between others.
TEST(Engine, PromptsOfOneLengthReadTogetherGiveWhatEachGivesAlone) {
  for (const models::ModelConfig& c : families()) {
    const auto model = models::build_model(c);
    model->eval();
    autograd::NoGradGuard no_grad;
    const auto [kv_heads, head_size] = model->kv_cache_heads();
    const KvCacheShape shape{c.n_layer, kv_heads, head_size, DType::kF32, Device::cpu()};
    const int64_t n = 24, rows = 3;
    std::vector<int64_t> ids;
    for (int64_t i = 0; i < rows; ++i) {
      const std::vector<int64_t> p = prompt_of(n, 300 + static_cast<uint64_t>(i));
      ids.insert(ids.end(), p.begin(), p.end());
    }
    KvCache together(shape, rows, 64, 0, model->attention_window());
    for (int64_t i = 0; i < rows; ++i) ASSERT_TRUE(together.reserve(i, n, n));
    together.begin_step(0, rows, n);
    const std::vector<float> batched = to_vector<float>(model->decode(from_vector(ids, {rows, n}), together));
    together.end_step();
    const size_t V = batched.size() / rows;
    for (int64_t i = 0; i < rows; ++i) {
      KvCache alone(shape, 1, 64, 0, model->attention_window());
      ASSERT_TRUE(alone.reserve(0, n, n));
      alone.begin_step(0, 1, n);
      const std::vector<int64_t> row(ids.begin() + i * n, ids.begin() + (i + 1) * n);
      const std::vector<float> one = to_vector<float>(model->decode(from_vector(row, {1, n}), alone));
      alone.end_step();
      ASSERT_EQ(one.size(), V);
      if (c.family_values.contains("num_local_experts")) {
        // A mixture of experts: each expert's product has as many rows as the batch's tokens
        // chose it, and a product of a few rows runs on gemv's kernels, many rows on the
        // GEMM's, so a row's logits agree to rounding, not bit for bit.
        for (size_t v = 0; v < V; ++v)
          EXPECT_NEAR(one[v], batched[i * V + v], 1e-5 * (1.0 + std::abs(one[v]))) << c.arch << " row " << i;
      } else {
        EXPECT_EQ(std::memcmp(one.data(), batched.data() + i * V, V * sizeof(float)), 0) << c.arch << " row " << i;
      }
    }
    std::vector<GenerationRequest> requests;
    const int64_t lengths[] = {5, 5, 5, 12, 12, 3, 12};
    for (int64_t i = 0; i < 7; ++i) {
      const GenerationRequest r = greedy(prompt_of(lengths[i], 200 + static_cast<uint64_t>(i)), 4 + 3 * i);
      requests.push_back(i % 3 == 1 ? sampled(r, static_cast<uint64_t>(i)) : r);
    }
    expect_each_as_alone(*model, requests, 7, c.arch);
  }
}

TEST(Engine, StopTokensMaxTokensAndAFullContextEndARequest) {
  const auto model = models::build_model(with_context(models::testing::tiny_llama(false), 32));
  model->eval();
  Engine engine(*model, {});
  const std::vector<int64_t> prompt = prompt_of(6, 5);
  const std::vector<int64_t> free = engine.generate({greedy(prompt, 10)})[0].tokens;
  ASSERT_EQ(free.size(), 10u);
  // A stop token ends the request before it; the first occurrence counts.
  GenerationRequest stop = greedy(prompt, 10);
  stop.stop_tokens = {free[3]};
  const GenerationResult stopped = engine.generate({stop})[0];
  const auto first = std::find(free.begin(), free.end(), free[3]) - free.begin();
  EXPECT_EQ(stopped.tokens, std::vector<int64_t>(free.begin(), free.begin() + first));
  EXPECT_EQ(stopped.finish_reason, "stop");
  // The context: 32 tokens cached at most, so 32 - 6 + 1 new tokens.
  const GenerationResult full = engine.generate({greedy(prompt, 100)})[0];
  EXPECT_EQ(full.tokens.size(), 27u);
  EXPECT_EQ(full.finish_reason, "length");
  Engine small(*model, {.max_batch = 2, .capacity = 10});
  EXPECT_EQ(small.generate({greedy(prompt, 100)})[0].tokens.size(), 5u);
  // Each slot's 10 tokens take one block of 64 (infer/kv_cache.h).
  EXPECT_EQ(small.cache().bytes(), 2 /* k, v */ * 3 /* layers */ * 2 /* slots */ * 2 /* kv heads */ * 64 * 4 * 4);
}

TEST(Engine, BadRequestsAreNamed) {
  const auto model = models::build_model(with_context(models::testing::tiny_gpt2(), 16));
  model->eval();
  Engine engine(*model, {});
  EXPECT_NE(error_of([&] { engine.generate({greedy({}, 3)}); }).find("request 0: generation: the prompt is empty"), std::string::npos);
  EXPECT_NE(error_of([&] { engine.generate({greedy({1}, 3), greedy({1, 40}, 3)}); })
                .find("request 1: generation: the prompt holds token 40, not in the vocabulary of 40"),
            std::string::npos);
  EXPECT_NE(error_of([&] { engine.generate({greedy(prompt_of(17, 1), 3)}); }).find("the prompt of 17 tokens is longer than the context of 16"),
            std::string::npos);
  EXPECT_EQ(engine.generate({greedy(prompt_of(16, 1), 3)})[0].tokens.size(), 1u);  // a full context: one token
  GenerationRequest bad = greedy({1}, 3);
  bad.sampling.top_p = 0.0;
  EXPECT_NE(error_of([&] { engine.generate({bad}); }).find("top_p = 0 is invalid: allowed: (0, 1]"), std::string::npos);
  EXPECT_NE(error_of([&] { Engine(*model, {.max_batch = 1, .capacity = 17}); }).find("block_size 16"), std::string::npos);
}

// A server's way: requests submitted while others run, one step at a time, one cancelled
// mid-way (its slot goes to the next at once); the others get what they get alone.
TEST(Engine, StepwiseRequestsJoinLeaveAndCancel) {
  const auto model = models::build_model(with_context(models::testing::tiny_llama(false), 64));
  model->eval();
  Engine alone(*model, {.max_batch = 1});
  Engine engine(*model, {.max_batch = 2});
  const GenerationRequest a = greedy(prompt_of(9, 1), 12), b = greedy(prompt_of(4, 2), 12), c = greedy(prompt_of(7, 3), 5);
  std::map<int64_t, std::vector<int64_t>> got;
  std::map<int64_t, std::string> ends;
  auto run = [&](int64_t steps) {
    for (int64_t s = 0; s < steps && !engine.idle(); ++s)
      for (const StepEvent& e : engine.step()) {
        if (e.token) got[e.id].push_back(*e.token);
        if (e.finish_reason) ends[e.id] = *e.finish_reason;
      }
  };
  const int64_t ia = engine.submit(a), ib = engine.submit(b);
  run(3);
  {
    // A step reads prompts up to its budget (at least one): 9 + 4 tokens do not fit 10.
    Engine budget(*model, {.max_batch = 2, .prefill_tokens_per_step = 10});
    budget.submit(a);
    budget.submit(b);
    budget.step();
    EXPECT_EQ(budget.running(), 1);
    EXPECT_EQ(budget.queued(), 1);
    budget.step();
    EXPECT_EQ(budget.running(), 2);
  }
  const int64_t ic = engine.submit(c);  // queued: both slots busy
  EXPECT_EQ(engine.running(), 2);
  EXPECT_EQ(engine.queued(), 1);
  engine.cancel(ia);  // a's client is gone
  EXPECT_EQ(engine.running(), 1);
  run(100);
  EXPECT_TRUE(engine.idle());
  EXPECT_EQ(ends.count(ia), 0u);
  EXPECT_EQ(got[ib], alone.generate({b})[0].tokens);
  EXPECT_EQ(got[ic], alone.generate({c})[0].tokens);
  EXPECT_EQ(ends[ib], "length");
  const std::vector<int64_t> a_alone = alone.generate({a})[0].tokens;
  EXPECT_EQ(got[ia], std::vector<int64_t>(a_alone.begin(), a_alone.begin() + static_cast<long>(got[ia].size())));
}

}  // namespace
}  // namespace trident::infer
