// The paged KV cache (infer/kv_cache.h): sequences of different lengths share one pool of
// blocks, taking them as they fill them and giving them back when they end (Note [Reserved
// blocks]); a sliding window's sequence holds a bounded ring of blocks however long it runs
// (Note [The sliding window's ring]); and through the engine, a pool too small for every slot
// at once still gives every request what it gets alone, requests waiting for blocks, and a
// windowed model's long generation crossing many blocks gives the uncached generation's tokens.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "infer/engine.h"
#include "core/copy.h"
#include "core/factory.h"
#include "core/rng.h"
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
constexpr int64_t kBt = KvCache::kBlockTokens;

const KvCacheShape kShape{2, 1, 8, DType::kF32, Device::cpu()};

// One step of `n` tokens for slot `slot` (the model's attend() is not needed to place them).
void step(KvCache& cache, int64_t slot, int64_t n) {
  cache.begin_step(slot, 1, n);
  cache.end_step();
}

TEST(KvCache, SequencesShareOnePoolTakingBlocksAsTheyFillThem) {
  KvCache cache(kShape, 3, 4 * kBt, 6 * kBt);
  EXPECT_EQ(cache.blocks(), 6);
  EXPECT_EQ(cache.bytes(), 6 * kBt * 2 * 2 * 1 * 8 * 4);
  EXPECT_TRUE(cache.reserve(0, 4 * kBt, 10));        // 4 blocks
  EXPECT_FALSE(cache.reserve(1, 3 * kBt, 10));       // 3 more: the pool has 2 unreserved
  EXPECT_TRUE(cache.reserve(1, 2 * kBt - 5, kBt));   // 2
  EXPECT_EQ(cache.reserved_blocks(), 6);
  EXPECT_EQ(cache.used_blocks(), 0);                 // nothing filled yet
  step(cache, 0, 10);
  step(cache, 1, kBt + 1);
  EXPECT_EQ(cache.used_blocks(), 3);
  for (int i = 0; i < kBt; ++i) step(cache, 0, 1);  // slot 0 crosses into its second block
  EXPECT_EQ(cache.length(0), kBt + 10);
  EXPECT_EQ(cache.used_blocks(), 4);
  // A step past the reservation is refused, naming the slot.
  EXPECT_NE(error_of([&] { step(cache, 1, kBt); }).find("slot 1 needs block 2"), std::string::npos);
  // Ending slot 0 gives back its blocks and reservation; slot 1 moves into slot 0 without a copy.
  cache.reset(0);
  EXPECT_EQ(cache.used_blocks(), 2);
  EXPECT_EQ(cache.reserved_blocks(), 2);
  cache.move(1, 0);
  EXPECT_EQ(cache.length(0), kBt + 1);
  EXPECT_EQ(cache.length(1), 0);
  EXPECT_TRUE(cache.reserve(1, 4 * kBt, 1));
  cache.reset(0);
  cache.reset(1);
  EXPECT_EQ(cache.used_blocks(), 0);
  EXPECT_EQ(cache.reserved_blocks(), 0);
}

TEST(KvCache, ASlidingWindowHoldsARingOfBlocks) {
  const int64_t window = 8, capacity = 20 * kBt;
  KvCache cache(kShape, 1, capacity, 0, window);
  // A window of 8 keys spans at most 2 blocks; the prompt's step writes all of its tokens first.
  EXPECT_EQ(cache.blocks_for(capacity, 5), 2);
  EXPECT_EQ(cache.blocks_for(capacity, 3 * kBt), 3);
  EXPECT_EQ(cache.blocks(), 20);  // the default pool: every slot's most at once (a prompt of 20 blocks)
  ASSERT_TRUE(cache.reserve(0, capacity, 5));
  step(cache, 0, 5);
  int64_t most = 0;
  for (int64_t p = 5; p < capacity; ++p) {
    step(cache, 0, 1);
    most = std::max(most, cache.used_blocks());
  }
  EXPECT_EQ(cache.length(0), capacity);
  EXPECT_EQ(most, 2);
}

// A block given back and taken again holds the last sequence's keys: the rows its new
// sequence has not stored yet are zero before the kernel reads them (a shorter row of a step
// reads the longest row's key count, masked, times 0), so NaN keys and values left behind
// change nothing.
TEST(KvCache, AReusedBlocksLeftoversNeverReachTheNextSequence) {
  Generator gen(5);
  // bf16: its tile products read a crossed tile's every key (f32's skip those past the last
  // query: Note [Causal tiles trimmed] in kernels/cpu/attention_tile.h).
  const KvCacheShape shape{1, 1, 8, DType::kBF16, Device::cpu()};
  auto attend = [&](KvCache& cache, int64_t first, int64_t rows, const Tensor& q, const Tensor& kv) {
    cache.begin_step(first, rows, q.size(2));
    Tensor out = cache.attend(0, core::cast(q, DType::kBF16), core::cast(kv, DType::kBF16), core::cast(kv, DType::kBF16), 0);
    cache.end_step();
    return to_vector<float>(core::cast(out, DType::kF32));
  };
  // Slot 0 holds 5 tokens, then both slots take 20 (more than the decoding kernel's queries,
  // so the tiled kernel runs): slot 1's 20 keys are read as 25, masked.
  const Tensor q5 = randn({1, 1, 5, 8}, gen), kv5 = randn({1, 5, 1, 8}, gen);
  const Tensor q20 = randn({2, 1, 20, 8}, gen), kv20 = randn({2, 20, 1, 8}, gen);
  auto run = [&](KvCache& cache) {
    EXPECT_TRUE(cache.reserve(0, 2 * kBt, 5) && cache.reserve(1, 2 * kBt, 20));
    attend(cache, 0, 1, q5, kv5);
    return attend(cache, 0, 2, q20, kv20);
  };
  KvCache fresh(shape, 2, 2 * kBt), reused(shape, 2, 2 * kBt);
  const std::vector<float> want = run(fresh);
  for (const float x : want) ASSERT_TRUE(std::isfinite(x));
  // Every block of the pool filled with NaN and given back.
  ASSERT_TRUE(reused.reserve(0, 2 * kBt, 2 * kBt) && reused.reserve(1, 2 * kBt, 2 * kBt));
  const Tensor nan = full({2, 2 * kBt, 1, 8}, std::numeric_limits<float>::quiet_NaN());
  attend(reused, 0, 2, full({2, 1, 2 * kBt, 8}, 1.0), nan);
  reused.reset(0);
  reused.reset(1);
  EXPECT_EQ(run(reused), want);
}

TEST(KvCache, BadShapesAndStepsAreNamed) {
  EXPECT_NE(error_of([] { KvCache(kShape, 0, 10); }).find("at least one slot"), std::string::npos);
  EXPECT_NE(error_of([] { KvCache(kShape, 1, 10, -1); }).find("a pool of -1 tokens"), std::string::npos);
  KvCache cache(kShape, 2, kBt);
  EXPECT_NE(error_of([&] { cache.reserve(0, kBt + 1, 1); }).find("positions <= 64"), std::string::npos);
  ASSERT_TRUE(cache.reserve(0, kBt, 1));
  EXPECT_NE(error_of([&] { step(cache, 0, kBt + 1); }).find("pass its capacity of 64"), std::string::npos);
}

TEST(KvCache, APoolSmallerThanTheBatchStillGivesEveryRequestItsTokens) {
  const auto model = models::build_model(with_context(models::testing::tiny_llama(true), 4 * kBt));
  model->eval();
  Engine alone(*model, {.max_batch = 1});
  // 4 slots but 5 blocks: a request of 69-129 positions reserves 2-3 blocks, so 1 or 2 run at once.
  Engine engine(*model, {.max_batch = 4, .cache_tokens = 5 * kBt});
  std::vector<GenerationRequest> requests;
  for (int64_t i = 0; i < 5; ++i) requests.push_back(greedy(prompt_of(30 + 15 * i, 50 + static_cast<uint64_t>(i)), 40 + 5 * i));
  const std::vector<GenerationResult> got = engine.generate(requests);
  for (size_t i = 0; i < requests.size(); ++i)
    EXPECT_EQ(got[i].tokens, alone.generate({requests[i]})[0].tokens) << "request " << i;
  EXPECT_EQ(engine.cache().used_blocks(), 0);
  EXPECT_EQ(engine.cache().reserved_blocks(), 0);
  // A request that could never fit is refused when submitted, naming what to change.
  Engine small(*model, {.max_batch = 4, .cache_tokens = 2 * kBt});
  const std::string e = error_of([&] { small.submit(greedy(prompt_of(100, 1), 100)); });
  EXPECT_NE(e.find("a prompt of 100 tokens with max_tokens = 100 needs 256 tokens of KV cache, but it holds 128"),
            std::string::npos) << e;
}

TEST(KvCache, AWindowedModelsLongGenerationAcrossBlocksEqualsUncachedGeneration) {
  const auto model = models::build_model(with_context(models::testing::tiny_llama(false), 5 * kBt, 8));
  model->eval();
  // A 100-token prompt's step holds 2 blocks, then the window's ring 2: 3 blocks are plenty.
  Engine engine(*model, {.max_batch = 1, .cache_tokens = 3 * kBt});
  const std::vector<int64_t> prompt = prompt_of(100, 7);
  engine.submit(greedy(prompt, 180));
  std::vector<int64_t> got;
  int64_t most = 0;
  while (!engine.idle()) {
    for (const StepEvent& e : engine.step())
      if (e.token) got.push_back(*e.token);
    most = std::max(most, engine.cache().used_blocks());
  }
  models::SampleOptions uncached;
  uncached.max_new_tokens = 180;
  uncached.temperature = 0.0;
  EXPECT_EQ(got, models::generate(*model, prompt, uncached));
  EXPECT_EQ(most, 2);
}

}  // namespace
}  // namespace trident::infer
