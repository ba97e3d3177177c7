// notify's command (monitor/notify_command.h): the event arrives on stdin; failures, signals
// and commands that outlive their time are errors naming the command.
#include "monitor/notify_command.h"

#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace trident::monitor {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(NotifyCommand, TheEventArrivesOnStdin) {
  const std::string out = ::testing::TempDir() + "/notify_command_test.out";
  const std::string event = "{\"rule\":\"spike\",\"step\":35}\n";
  ASSERT_TRUE(run_notify_command("cat > '" + out + "'", event).is_ok());
  EXPECT_EQ(slurp(out), event);
  // A command that never reads its input is fine too.
  EXPECT_TRUE(run_notify_command("true", std::string(1 << 20, 'x')).is_ok());
}

TEST(NotifyCommand, FailuresNameTheCommandAndHow) {
  Status s = run_notify_command("exit 3", "{}");
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.to_string().find("notify command 'exit 3': exited with status 3"), std::string::npos) << s.to_string();
  s = run_notify_command("kill -9 $$", "{}");
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.to_string().find("ended by signal 9"), std::string::npos) << s.to_string();
  // Never waits past its time: the command (and its children) are killed.
  s = run_notify_command("sleep 60 & sleep 60", "{}", 0.3);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.to_string().find("still running after"), std::string::npos) << s.to_string();
}

}  // namespace
}  // namespace trident::monitor
