// What `trident launch --max-restarts` decides between attempts (apps/restart_policy.h, Note
// [Restarts]): which exit statuses restart, what mpirun's words say ended the job, the restart
// budget over a window with its backoff, and hostfiles.
#include "restart_policy.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include "train/stop_request.h"

namespace trident::cli {
namespace {

JobEnd ended(int status, std::string output = "") {
  JobEnd e;
  e.status = status;
  e.output = std::move(output);
  return e;
}

TEST(RestartPolicy, FailuresRestartAndDecisionsDoNot) {
  // A rank killed (mpirun's 128 + 9), an error a retry may get past, a stop launch did not ask
  // for, a hang the hang rule ended: restart.
  for (int s : {137, 143, 1, train::kExitStoppedEarly, 76}) EXPECT_FALSE(why_no_restart(ended(s))) << s;
  // Done, and every status that says running again would do the same.
  EXPECT_EQ(*why_no_restart(ended(0)), "the run finished");
  EXPECT_NE(why_no_restart(ended(train::kExitConfigError))->find("configuration error"), std::string::npos);
  EXPECT_NE(why_no_restart(ended(train::kExitStoppedByRule))->find("alert rule"), std::string::npos);
  EXPECT_NE(why_no_restart(ended(train::kExitDiverged))->find("diverged"), std::string::npos);
  EXPECT_NE(why_no_restart(ended(105))->find("command-line"), std::string::npos);
  EXPECT_NE(why_no_restart(ended(109))->find("--config"), std::string::npos);
  EXPECT_TRUE(why_no_restart(ended(90)));  // any other status from 78 to 127
  // Whoever stopped launch wants the job stopped, whatever status it ended with.
  JobEnd stopped = ended(137);
  stopped.stop_forwarded = true;
  EXPECT_NE(why_no_restart(stopped)->find("stop request"), std::string::npos);
  JobEnd missing = ended(1);
  missing.mpirun_missing = true;
  EXPECT_NE(why_no_restart(missing)->find("mpirun"), std::string::npos);
  // A 75 from the run's own time budget: a restart would run past the allocation.
  EXPECT_NE(why_no_restart(ended(train::kExitStoppedEarly,
                                 "stop: train.max_runtime = \"1h\" would run out before the next step"))
                ->find("max_runtime"),
            std::string::npos);
}

TEST(RestartPolicy, FailureCauseReadsOpenMpisWords) {
  // As OpenMPI 4.1 prints them (captured from Debian 12's mpirun).
  EXPECT_EQ(failure_cause("----\nmpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9 "
                          "(Killed).\n----\n"),
            "rank 1 on node vm: signal 9 (Killed)");
  EXPECT_EQ(failure_cause("mpirun detected that one or more processes exited with non-zero status, thus causing\n"
                          "the job to be terminated. The first process to do so was:\n\n"
                          "  Process name: [[15817,1],1]\n  Exit code:    76\n"),
            "rank 1: exit status 76");
  EXPECT_EQ(failure_cause("MPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD\nwith errorcode 78.\n"),
            "rank 0 aborted with 78");
  EXPECT_EQ(failure_cause("nothing it recognises"), "");
  EXPECT_EQ(describe_status(137), "signal 9 (SIGKILL)");
  EXPECT_EQ(describe_status(1), "exit status 1");
}

TEST(RestartPolicy, BudgetCountsOverTheWindowAndBacksOffUpToAMinute) {
  using Clock = RestartBudget::Clock;
  const Clock::time_point t0 = Clock::now();
  const auto at = [&](double s) { return t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s)); };
  RestartBudget whole(2, 0, 1.0);
  EXPECT_TRUE(whole.take(at(0)));
  EXPECT_DOUBLE_EQ(whole.backoff_s(at(0)), 1.0);
  EXPECT_TRUE(whole.take(at(1000)));
  EXPECT_DOUBLE_EQ(whole.backoff_s(at(1000)), 2.0);
  EXPECT_FALSE(whole.take(at(1e6)));  // no window: two in all
  EXPECT_EQ(whole.used(at(1e6)), 2);

  RestartBudget windowed(2, 100, 20.0);
  EXPECT_TRUE(windowed.take(at(0)));
  EXPECT_TRUE(windowed.take(at(50)));
  EXPECT_DOUBLE_EQ(windowed.backoff_s(at(50)), 40.0);
  EXPECT_FALSE(windowed.take(at(90)));  // two within the last 100 s
  EXPECT_TRUE(windowed.take(at(120)));  // the first has left the window
  EXPECT_EQ(windowed.used(at(120)), 2);
  EXPECT_TRUE(windowed.take(at(400)));
  EXPECT_EQ(windowed.used(at(400)), 1);
  RestartBudget many(100, 0, 20.0);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(many.take(at(i)));
  EXPECT_DOUBLE_EQ(many.backoff_s(at(5)), 60.0);  // 20 x 16, at most a minute
  RestartBudget none(0, 0, 1.0);
  EXPECT_FALSE(none.take(at(0)));
}

std::string write_file(const std::string& text) {
  const std::string path = ::testing::TempDir() + "/hostfile_" + std::to_string(::getpid());
  std::ofstream(path) << text;
  return path;
}

TEST(RestartPolicy, HostfilesAndTheirErrors) {
  const std::string path = write_file("# the cluster\nh0 slots=2\n\nh1 slots=4 max_slots=4  # big one\nh2\n");
  auto hosts = read_hostfile(path);
  ASSERT_TRUE(hosts.is_ok()) << hosts.status().to_string();
  ASSERT_EQ(hosts.value().size(), 3u);
  EXPECT_EQ(hosts.value()[0].name, "h0");
  EXPECT_EQ(hosts.value()[0].slots, 2);
  EXPECT_EQ(hosts.value()[1].slots, 4);
  EXPECT_NE(hosts.value()[1].line.find("max_slots=4"), std::string::npos);
  EXPECT_EQ(hosts.value()[2].slots, 1);
  const std::string bad = write_file("h0 slots=2\nh1 slots=zero\n");
  auto refused = read_hostfile(bad);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("line 2"), std::string::npos) << refused.status().message();
  EXPECT_NE(refused.status().message().find("slots=zero"), std::string::npos);
  EXPECT_FALSE(read_hostfile("/nonexistent/hostfile").is_ok());
  std::remove(path.c_str());
  std::remove(bad.c_str());
}

TEST(RestartPolicy, HostChecksAnswerWithinTheirTimeout) {
  // This host needs no check; an agent that fails, and one that never answers, mark a host
  // down, the second within the timeout.
  std::vector<HostEntry> hosts(3);
  hosts[0].name = "localhost";
  hosts[1].name = "elsewhere";
  hosts[2].name = "elsewhere2";
  EXPECT_EQ(check_hosts(hosts, "false", 5), (std::vector<bool>{true, false, false}));
  EXPECT_EQ(check_hosts({hosts[1]}, "sh -c true", 5), std::vector<bool>{true});
  const auto t1 = std::chrono::steady_clock::now();
  const std::string hang = write_file("#!/bin/sh\nsleep 30\n");
  ASSERT_EQ(::chmod(hang.c_str(), 0755), 0);
  EXPECT_EQ(check_hosts({hosts[1]}, hang, 0.5), std::vector<bool>{false});
  std::remove(hang.c_str());
  const double hung_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  EXPECT_LT(hung_s, 5.0);
}

}  // namespace
}  // namespace trident::cli
