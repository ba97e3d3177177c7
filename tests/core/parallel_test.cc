// parallel_for: an exception thrown in a chunk reaches the caller (an exception leaving an
// OpenMP region would end the process), after every other chunk has run. parallel_for_dynamic:
// every item runs once, in chunks of exactly `grain` (the last shorter), and an exception
// reaches the caller.
#include "core/parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <stdexcept>
#include <utility>
#include <vector>

namespace trident {
namespace {

TEST(ParallelFor, AnExceptionInAChunkReachesTheCaller) {
  const int saved = num_threads();
  set_num_threads(2);
  std::atomic<int64_t> done{0};
  try {
    parallel_for(0, 1000, 10, [&](int64_t b, int64_t e) {
      if (b == 0) throw std::invalid_argument("chunk starting at 0 failed");
      done += e - b;
    });
    ADD_FAILURE() << "the exception was lost";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "chunk starting at 0 failed");
  }
  EXPECT_EQ(done.load(), 500) << "the other chunk (of two threads' worth) still ran";
  // Nested: the inner loop runs on the worker's thread, and its exception joins the outer one.
  EXPECT_THROW(parallel_for(0, 4, 1,
                            [&](int64_t b, int64_t e) {
                              parallel_for(b, e, 1, [&](int64_t ib, int64_t ie) {
                                if (ib <= 3 && 3 < ie) throw std::runtime_error("inner");
                              });
                            }),
               std::runtime_error);
  set_num_threads(saved);
}

TEST(ParallelForDynamic, RunsEveryItemOnceInChunksOfTheGrain) {
  const int saved = num_threads();
  set_num_threads(2);
  std::vector<std::atomic<int>> seen(1003);
  std::mutex mutex;
  std::set<std::pair<int64_t, int64_t>> chunks;
  std::set<int> threads;
  parallel_for_dynamic(5, 1003, 10, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) ++seen[static_cast<size_t>(i)];
    const std::lock_guard lock(mutex);
    chunks.insert({b, e});
    threads.insert(omp_get_thread_num());
  });
  for (int64_t i = 0; i < 1003; ++i) EXPECT_EQ(seen[static_cast<size_t>(i)].load(), i < 5 ? 0 : 1) << "item " << i;
  ASSERT_EQ(chunks.size(), 100u);
  EXPECT_EQ(*chunks.begin(), std::make_pair(int64_t{5}, int64_t{15}));
  EXPECT_EQ(*chunks.rbegin(), std::make_pair(int64_t{995}, int64_t{1003}));
  for (const int t : threads) EXPECT_LT(t, num_threads()) << "scratch indexed by thread number stays in bounds";
  EXPECT_THROW(parallel_for_dynamic(0, 100, 1,
                                    [&](int64_t b, int64_t) {
                                      if (b == 42) throw std::runtime_error("chunk 42");
                                    }),
               std::runtime_error);
  set_num_threads(saved);
}

}  // namespace
}  // namespace trident
