// GoogleTest main for tests that run under mpirun: every rank runs every test; only rank 0
// prints the usual output, other ranks print only failures (prefixed by their rank), and the
// exit code is non-zero on any rank that failed, so mpirun (and ctest) report it.
#include <gtest/gtest.h>

#include <cstdio>

#include "comm/mpi_communicator.h"

namespace {

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: %s\n", rank_, r.file_name() ? r.file_name() : "?", r.line_number(),
                   r.summary());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  trident::comm::MpiRuntime::init(&argc, &argv);
  const int rank = trident::comm::MpiRuntime::world()->rank();
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  return RUN_ALL_TESTS();
}
