#include "monitor/process_stats.h"

#include <gtest/gtest.h>

namespace trident::monitor {
namespace {

TEST(ProcessStats, ParsesProcTexts) {
  // The command name may hold spaces and parentheses: fields count from the last ')'.
  const std::string stat = "1234 (my (odd) prog) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 1 0";
  ASSERT_TRUE(parse_proc_stat_cpu_seconds(stat, 100).has_value());
  EXPECT_DOUBLE_EQ(*parse_proc_stat_cpu_seconds(stat, 100), 3.0);
  EXPECT_FALSE(parse_proc_stat_cpu_seconds("garbage", 100).has_value());
  EXPECT_EQ(parse_status_kib("Name:\tx\nVmRSS:\t  2048 kB\n", "VmRSS"), 2048 * 1024);
  EXPECT_FALSE(parse_status_kib("Name:\tx\n", "VmRSS").has_value());
  const std::string dev =
      "Inter-|   Receive                                                |  Transmit\n"
      " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n"
      "    lo:  1000      10    0    0    0     0          0         0     1000      10    0    0    0     0       0          0\n"
      "  eth0: 123456   100    0    0    0     0          0         0    654321     90    0    0    0     0       0          0\n";
  const auto ifaces = parse_net_dev(dev);
  ASSERT_EQ(ifaces.size(), 2u);
  EXPECT_EQ(ifaces[1].name, "eth0");
  EXPECT_EQ(ifaces[1].receive_bytes, 123456);
  EXPECT_EQ(ifaces[1].transmit_bytes, 654321);
}

TEST(ProcessStats, ReadsThisProcess) {
  const ProcessStats s = read_process_stats();
  ASSERT_TRUE(s.rss_bytes.has_value());
  EXPECT_GT(*s.rss_bytes, 0);
  ASSERT_TRUE(s.cpu_seconds.has_value());
  EXPECT_GE(*s.cpu_seconds, 0.0);
  ASSERT_TRUE(s.host_memory_total_bytes.has_value());
  EXPECT_GE(*s.host_memory_total_bytes, *s.host_memory_available_bytes);
  EXPECT_FALSE(s.network.empty());  // at least loopback
}

}  // namespace
}  // namespace trident::monitor
