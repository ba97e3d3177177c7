// Naming the rank a hung job waits for from every rank's flight record
// (comm/flight_diagnosis.h).
#include "comm/flight_diagnosis.h"

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace trident::comm {
namespace {

// `n` operations on `comm`, all completed except the last when `last_in_flight`; the last is
// `last_op`, the others all_reduce.
std::vector<FlightRecord> ops(int comm, int size, int64_t n, const std::string& last_op,
                              bool last_in_flight) {
  std::vector<FlightRecord> r;
  for (int64_t s = 1; s <= n; ++s)
    r.push_back({comm, size, s, s == n ? last_op : "all_reduce", 64, 0.1 * static_cast<double>(s),
                 !(s == n && last_in_flight)});
  return r;
}

std::vector<FlightRecord> operator+(std::vector<FlightRecord> a,
                                    const std::vector<FlightRecord>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(FlightDiagnosis, NamesTheRankBehindAndTheCollectiveTheOthersWaitIn) {
  // Rank 2 stays inside world #5; the others finished it and wait in #6, a barrier. A
  // sub-communicator where nobody is behind must not distract.
  std::map<int, std::vector<FlightRecord>> by_rank;
  for (int r : {0, 1, 3})
    by_rank[r] = ops(1, 2, 3, "all_gather", false) + ops(0, 4, 6, "barrier", true);
  by_rank[2] = ops(1, 2, 3, "all_gather", false) + ops(0, 4, 5, "all_reduce", true);
  const FlightDiagnosis d = diagnose_flight_records(by_rank);
  ASSERT_TRUE(d.found) << d.text;
  EXPECT_EQ(d.comm, 0);
  EXPECT_EQ(d.comm_size, 4);
  EXPECT_EQ(d.behind, std::vector<int>({2}));
  EXPECT_EQ(d.ahead, std::vector<int>({0, 1, 3}));
  EXPECT_EQ(d.behind_seq, 5);
  EXPECT_EQ(d.behind_op, "all_reduce");
  EXPECT_EQ(d.behind_state, "in flight");
  EXPECT_EQ(d.waited_op, "barrier");
  EXPECT_EQ(d.text,
            "rank 2 is behind on communicator 0 (4 ranks): its last operation there is #5 "
            "all_reduce (in flight); "
            "ranks 0, 1 and 3 went on to #6 barrier, which rank 2 never started");
}

TEST(FlightDiagnosis, SeveralRanksBehindAndARankThatNeverCommunicated) {
  std::map<int, std::vector<FlightRecord>> by_rank;
  by_rank[0] = ops(0, 3, 2, "broadcast", true);
  by_rank[1] = {};  // stuck before its first operation
  by_rank[2] = ops(0, 3, 2, "broadcast", true);
  FlightDiagnosis d = diagnose_flight_records(by_rank);
  ASSERT_TRUE(d.found) << d.text;
  EXPECT_EQ(d.behind, std::vector<int>({1}));
  EXPECT_EQ(d.behind_seq, 0);
  EXPECT_EQ(d.behind_op, "");
  EXPECT_EQ(d.waited_op, "all_reduce");  // #1
  by_rank[1] = ops(0, 3, 1, "all_reduce", false);
  by_rank[2] = ops(0, 3, 1, "all_reduce", false);
  d = diagnose_flight_records(by_rank);
  EXPECT_EQ(d.behind, std::vector<int>({1, 2}));
  EXPECT_EQ(d.behind_state, "completed");
  EXPECT_NE(d.text.find("ranks 1 and 2 are behind"), std::string::npos) << d.text;
  EXPECT_NE(d.text.find("rank 0 went on to #2 broadcast, which ranks 1 and 2 never started"),
            std::string::npos)
      << d.text;
}

TEST(FlightDiagnosis, ASubCommunicatorWhenTheWorldAgrees) {
  std::map<int, std::vector<FlightRecord>> by_rank;
  by_rank[0] = ops(0, 4, 3, "all_reduce", false) + ops(1, 2, 7, "send to rank 1", true);
  by_rank[1] = ops(0, 4, 3, "all_reduce", false) + ops(1, 2, 6, "recv from rank 0", false);
  by_rank[2] = ops(0, 4, 3, "all_reduce", false);
  by_rank[3] = ops(0, 4, 3, "all_reduce", false);
  const FlightDiagnosis d = diagnose_flight_records(by_rank);
  ASSERT_TRUE(d.found) << d.text;
  EXPECT_EQ(d.comm, 1);
  EXPECT_EQ(d.behind, std::vector<int>({1}));
  EXPECT_EQ(d.ahead, std::vector<int>({0}));
  EXPECT_EQ(d.waited_op, "send to rank 1");
}

TEST(FlightDiagnosis, NobodyBehind) {
  std::map<int, std::vector<FlightRecord>> by_rank;
  for (int r = 0; r < 4; ++r) by_rank[r] = ops(0, 4, 9, "all_reduce", true);
  FlightDiagnosis d = diagnose_flight_records(by_rank);
  EXPECT_FALSE(d.found);
  EXPECT_NE(d.text.find("no rank is behind"), std::string::npos) << d.text;
  d = diagnose_flight_records({{0, ops(0, 4, 9, "all_reduce", true)}});
  EXPECT_FALSE(d.found);
  EXPECT_NE(d.text.find("fewer than two ranks"), std::string::npos) << d.text;
}

}  // namespace
}  // namespace trident::comm
