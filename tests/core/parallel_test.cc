// parallel_for: an exception thrown in a chunk reaches the caller (an exception leaving an
// OpenMP region would end the process), after every other chunk has run.
#include "core/parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>

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

}  // namespace
}  // namespace trident
