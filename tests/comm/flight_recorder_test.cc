// The flight recorder (comm/flight_recorder.h): numbering per communicator, completion, the
// ring of kFlightRecords, and its JSON and text forms.
#include "comm/flight_recorder.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "comm/flight_diagnosis.h"

#include <gtest/gtest.h>

namespace trident::comm {
namespace {

TEST(FlightRecorder, NumbersOperationsPerCommunicatorAndMarksCompletion) {
  FlightRecorder fr;
  const int world = fr.new_communicator(), dp = fr.new_communicator();
  EXPECT_EQ(world, 0);
  EXPECT_EQ(dp, 1);
  EXPECT_EQ(fr.started(world, 4, "all_reduce", 16), 1);
  EXPECT_EQ(fr.started(dp, 2, "all_gather", 64), 1);
  EXPECT_EQ(fr.started(world, 4, "barrier", 0), 2);
  fr.completed(world, 1);
  fr.completed(dp, 1);
  const auto r = fr.records();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_TRUE(r[0].completed);
  EXPECT_TRUE(r[1].completed);
  EXPECT_FALSE(r[2].completed);
  EXPECT_EQ(r[2].op, "barrier");
  EXPECT_EQ(r[2].seq, 2);
  const std::string j = fr.json();
  EXPECT_NE(j.find("{\"comm\": 0, \"comm_size\": 4, \"seq\": 2, \"op\": \"barrier\", \"bytes\": 0"), std::string::npos) << j;
  EXPECT_NE(j.find("\"state\": \"in flight\""), std::string::npos) << j;
  const std::string t = fr.text(1);
  EXPECT_NE(t.find("comm 0 (4 ranks) #2 barrier 0 B at"), std::string::npos) << t;
  EXPECT_EQ(t.find("all_gather"), std::string::npos) << t;  // only the newest one
}

TEST(FlightRecorder, KeepsTheLastRecordsOnly) {
  FlightRecorder fr;
  const int c = fr.new_communicator();
  for (int i = 0; i < kFlightRecords + 10; ++i) fr.completed(c, fr.started(c, 2, "all_reduce", 8));
  const auto r = fr.records();
  ASSERT_EQ(r.size(), static_cast<size_t>(kFlightRecords));
  EXPECT_EQ(r.front().seq, 11);
  EXPECT_EQ(r.back().seq, kFlightRecords + 10);
}

TEST(FlightRecorder, WritesItsDumpWhereTold) {
  FlightRecorder fr;
  EXPECT_FALSE(fr.write_dump());  // nowhere set
  const std::string path = ::testing::TempDir() + "/flight_recorder_test.json";
  fr.set_dump_path(path);
  fr.started(fr.new_communicator(), 2, "send to rank 1", 4);
  ASSERT_TRUE(fr.write_dump());
  std::FILE* f = std::fopen(path.c_str(), "r");
  ASSERT_NE(f, nullptr);
  char buf[512] = {};
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  EXPECT_NE(std::string(buf, n).find("\"op\": \"send to rank 1\""), std::string::npos) << buf;
  fr.set_dump_path("/nonexistent-dir/x.json");
  EXPECT_FALSE(fr.write_dump());
}

TEST(FlightRecorder, ParsesItsOwnDumpsAndNothingElse) {
  FlightRecorder fr;
  const int c = fr.new_communicator();
  fr.completed(c, fr.started(c, 4, "all_reduce", 4096));
  fr.started(c, 4, "recv from \"rank\" 3", 8);
  const auto back = FlightRecorder::parse(fr.json());
  ASSERT_TRUE(back.has_value());
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0].op, "all_reduce");
  EXPECT_EQ((*back)[0].bytes, 4096);
  EXPECT_TRUE((*back)[0].completed);
  EXPECT_EQ((*back)[1].op, "recv from \"rank\" 3");
  EXPECT_EQ((*back)[1].seq, 2);
  EXPECT_FALSE((*back)[1].completed);
  EXPECT_TRUE(FlightRecorder::parse("[\n]\n").has_value());
  EXPECT_FALSE(FlightRecorder::parse("").has_value());
  EXPECT_FALSE(FlightRecorder::parse("[\n  {\"comm\": \"x\"}\n]").has_value());
}

// Note [Naming the rank at a timeout]: of 3 ranks, 0 and 1 timed out waiting in #5 and wrote
// their records; rank 2 wrote none (it is busy outside communication) and is named. With
// every rank's record, the one behind is named.
TEST(FlightRecorder, ATimeoutNamesTheRankThatWroteNoRecordOrIsBehind) {
  const std::string dir = ::testing::TempDir() + "/stalled_" + std::to_string(::getpid());
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  auto rank_at = [&](int rank, int64_t last_seq) {
    FlightRecorder fr;
    const int c = fr.new_communicator();
    for (int64_t s = 1; s <= last_seq; ++s) {
      fr.started(c, 3, "all_reduce", 8);
      if (s < last_seq) fr.completed(c, s);
    }
    fr.set_dump_dir(dir, rank);
    EXPECT_TRUE(fr.write_dump());
    return fr.dump_path_of(2);
  };
  rank_at(1, 5);
  FlightRecorder me;
  me.set_dump_dir(dir, 0);
  me.started(me.new_communicator(), 3, "all_reduce", 8);
  ASSERT_TRUE(me.write_dump());
  std::remove(me.dump_path_of(2).c_str());
  rank_at(0, 5);
  const auto t = std::chrono::steady_clock::now();
  const std::string silent = name_stalled_ranks(me, 3, 0.3, now - 5);
  EXPECT_NE(silent.find("rank 2 stopped taking part"), std::string::npos) << silent;
  EXPECT_GE(std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count(), 0.3);
  // Every rank wrote one: rank 2's ends at #4, so it is behind.
  rank_at(2, 4);
  const std::string behind = name_stalled_ranks(me, 3, 5, now - 5);
  EXPECT_NE(behind.find("rank 2 is behind on communicator 0"), std::string::npos) << behind;
  // An old dump (written before this timeout could have begun) is not taken for a new one.
  EXPECT_NE(name_stalled_ranks(me, 3, 0.1, now + 3600).find("ranks 0, 1 and 2 stopped"), std::string::npos);
  FlightRecorder nowhere;
  EXPECT_EQ(name_stalled_ranks(nowhere, 3, 1, 0), "");
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace trident::comm
