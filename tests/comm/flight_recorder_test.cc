// The flight recorder (comm/flight_recorder.h): numbering per communicator, completion, the
// ring of kFlightRecords, and its JSON and text forms.
#include "comm/flight_recorder.h"

#include <string>

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

}  // namespace
}  // namespace trident::comm
