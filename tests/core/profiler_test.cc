// The profiler (core/profiler.h) and its report (core/profile_report.h): nesting splits self
// from total time exactly (on a fake clock), nothing is recorded when off or off the
// recording thread, scopes in parallel regions corrupt nothing, and the table and JSON carry
// every row. Real-clock tests judge only ordering and containment, never absolute times.
#include "core/profiler.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/parallel.h"

namespace trident::profiler {
namespace {

// A clock the test advances by hand: every self and total time is then exact.
struct FakeClock {
  static inline int64_t now = 0;
  static ProfilerOptions options() {
    now = 0;
    return {[] { return now; }};
  }
  static void advance_ms(int64_t ms) { now += ms * 1000000; }
};

const ProfileRow& row(const ProfileReport& r, const char* name, Phase phase) {
  const ProfileRow* found = r.find(name, phase);
  if (found == nullptr) {
    ADD_FAILURE() << "no row (" << name << ", " << phase_name(phase) << ")\n" << r.table(100);
    static const ProfileRow none;
    return none;
  }
  return *found;
}

TEST(Profiler, NestingSplitsSelfFromTotalTime) {
  start(FakeClock::options());
  {
    ProfileScope outer("outer", Phase::kForward);
    FakeClock::advance_ms(2);
    {
      ProfileScope inner("inner", Phase::kBackward);
      FakeClock::advance_ms(5);
      {
        ProfileScope leaf("leaf", Phase::kCommunication);
        FakeClock::advance_ms(1);
      }
    }
    FakeClock::advance_ms(3);
    {
      ProfileScope inner("inner", Phase::kBackward);
      FakeClock::advance_ms(4);
    }
  }
  FakeClock::advance_ms(10);  // outside any scope
  const ProfileReport r = stop();

  EXPECT_DOUBLE_EQ(r.wall_ms, 25.0);
  ASSERT_EQ(r.rows.size(), 3u);
  const ProfileRow& outer = row(r, "outer", Phase::kForward);
  EXPECT_EQ(outer.calls, 1);
  EXPECT_DOUBLE_EQ(outer.total_ms, 15.0);
  EXPECT_DOUBLE_EQ(outer.self_ms, 5.0);
  const ProfileRow& inner = row(r, "inner", Phase::kBackward);
  EXPECT_EQ(inner.calls, 2);
  EXPECT_DOUBLE_EQ(inner.total_ms, 10.0);
  EXPECT_DOUBLE_EQ(inner.self_ms, 9.0);
  const ProfileRow& leaf = row(r, "leaf", Phase::kCommunication);
  EXPECT_EQ(leaf.calls, 1);
  EXPECT_DOUBLE_EQ(leaf.self_ms, 1.0);
  EXPECT_DOUBLE_EQ(leaf.total_ms, 1.0);
  // Largest self time first; the self times partition the time inside scopes.
  EXPECT_EQ(r.rows[0].name, "inner");
  EXPECT_EQ(r.rows[1].name, "outer");
  EXPECT_EQ(r.rows[2].name, "leaf");
  EXPECT_DOUBLE_EQ(r.self_ms(), 15.0);
  EXPECT_DOUBLE_EQ(r.coverage(), 15.0 / 25.0);
  EXPECT_DOUBLE_EQ(r.phase_ms(Phase::kBackward), 9.0);
  EXPECT_DOUBLE_EQ(r.phase_ms(Phase::kOptimizer), 0.0);
}

TEST(Profiler, AScopeInsideItsOwnKeyCountsItsTotalOnce) {
  start(FakeClock::options());
  {
    ProfileScope a("engine", Phase::kBackward);
    FakeClock::advance_ms(1);
    {
      ProfileScope node("node", Phase::kBackward);
      ProfileScope b("engine", Phase::kBackward);  // a backward inside a backward node
      FakeClock::advance_ms(2);
    }
  }
  const ProfileReport r = stop();
  const ProfileRow& engine = row(r, "engine", Phase::kBackward);
  EXPECT_EQ(engine.calls, 2);
  EXPECT_DOUBLE_EQ(engine.self_ms, 3.0);
  EXPECT_DOUBLE_EQ(engine.total_ms, 3.0);  // not 3 + 2
  EXPECT_DOUBLE_EQ(row(r, "node", Phase::kBackward).total_ms, 2.0);
}

TEST(Profiler, OneNameInTwoPhasesIsTwoRowsAndOneTextIsOneRow) {
  // Two pointers to the same text (a name from two translation units) make one row.
  static const std::string a = "layernorm", b = "layernorm";
  ASSERT_NE(a.c_str(), b.c_str());
  start(FakeClock::options());
  for (const std::string* name : {&a, &b}) {
    ProfileScope s(name->c_str(), Phase::kForward);
    FakeClock::advance_ms(1);
  }
  {
    ProfileScope s("layernorm", Phase::kRecompute);
    FakeClock::advance_ms(1);
  }
  const ProfileReport r = stop();
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(row(r, "layernorm", Phase::kForward).calls, 2);
  EXPECT_EQ(row(r, "layernorm", Phase::kRecompute).calls, 1);
}

TEST(Profiler, OffRecordsNothing) {
  EXPECT_FALSE(enabled());
  { ProfileScope s("before", Phase::kForward); }
  start();
  EXPECT_TRUE(enabled());
  const ProfileReport r = stop();
  EXPECT_FALSE(enabled());
  EXPECT_TRUE(r.rows.empty());
  EXPECT_GE(r.wall_ms, 0.0);
  { ProfileScope s("after", Phase::kForward); }
  start();
  EXPECT_TRUE(stop().rows.empty());
}

TEST(Profiler, ScopesOpenAcrossStartOrStopAreDropped) {
  std::optional<ProfileScope> opened_before;
  opened_before.emplace("before", Phase::kForward);
  start(FakeClock::options());
  {
    ProfileScope inside("inside", Phase::kForward);
    FakeClock::advance_ms(1);
    opened_before.reset();  // closes during the session: it never started recording
    ProfileScope nested("nested", Phase::kForward);
    FakeClock::advance_ms(1);
  }
  std::optional<ProfileScope> still_open;
  still_open.emplace("still_open", Phase::kForward);
  const ProfileReport r = stop();
  start(FakeClock::options());
  still_open.reset();  // closes in the next session: ignored there
  const ProfileReport next = stop();
  EXPECT_EQ(r.find("before", Phase::kForward), nullptr);
  EXPECT_EQ(r.find("still_open", Phase::kForward), nullptr);
  EXPECT_EQ(row(r, "nested", Phase::kForward).calls, 1);
  EXPECT_DOUBLE_EQ(row(r, "inside", Phase::kForward).self_ms, 1.0);
  EXPECT_TRUE(next.rows.empty());
}

TEST(Profiler, ScopesOnOtherThreadsRecordNothing) {
  start();
  {
    ProfileScope main_scope("main", Phase::kOther);
    std::thread worker([] {
      for (int i = 0; i < 1000; ++i) ProfileScope s("worker", Phase::kForward);
    });
    worker.join();
  }
  const ProfileReport r = stop();
  EXPECT_EQ(r.find("worker", Phase::kForward), nullptr);
  EXPECT_EQ(row(r, "main", Phase::kOther).calls, 1);
}

TEST(Profiler, ScopesInsideParallelRegionsCorruptNothing) {
  const int threads_before = num_threads();
  set_num_threads(4);
  const std::thread::id main_thread = std::this_thread::get_id();
  int64_t on_main = 0;  // chunks the recording thread ran itself (OpenMP's master thread)
  start();
  {
    ProfileScope outer("outer", Phase::kForward);
    for (int rep = 0; rep < 20; ++rep) {
      parallel_for(0, 64, 1, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          ProfileScope chunk("chunk", Phase::kForward);
          ProfileScope nested("nested", Phase::kForward);
          volatile double x = 0;
          for (int k = 0; k < 1000; ++k) x = x + k;
          if (std::this_thread::get_id() == main_thread) ++on_main;
        }
      });
    }
  }
  const ProfileReport r = stop();
  set_num_threads(threads_before);
  const ProfileRow& outer = row(r, "outer", Phase::kForward);
  EXPECT_EQ(outer.calls, 1);
  // Only the recording thread's chunks count, each fully nested in `outer`.
  const ProfileRow* chunk = r.find("chunk", Phase::kForward);
  const ProfileRow* nested = r.find("nested", Phase::kForward);
  EXPECT_EQ(chunk ? chunk->calls : 0, on_main);
  EXPECT_EQ(nested ? nested->calls : 0, on_main);
  const double inside = (chunk ? chunk->total_ms : 0.0);
  EXPECT_LE(inside, outer.total_ms);
  EXPECT_LE(nested ? nested->total_ms : 0.0, inside);
  EXPECT_LE(outer.self_ms, outer.total_ms);
  EXPECT_LE(r.self_ms(), r.wall_ms);
  // The self times still partition the outer scope's total.
  EXPECT_NEAR(r.self_ms(), outer.total_ms, 1e-6 * outer.total_ms + 1e-9);
}

TEST(Profiler, StartTwiceOrStopElsewhereThrows) {
  EXPECT_THROW(stop(), Error);
  start();
  EXPECT_THROW(start(), Error);
  std::thread other([] {
    EXPECT_THROW(stop(), Error);
    EXPECT_THROW(start(), Error);
  });
  other.join();
  EXPECT_TRUE(enabled());
  (void)stop();
}

TEST(Profiler, ASessionLeftByAnExceptionIsStopped) {
  try {
    ProfileSession session;
    ProfileScope s("failing", Phase::kForward);
    throw std::runtime_error("step failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_FALSE(enabled());
  ProfileSession again(FakeClock::options());
  {
    ProfileScope s("ok", Phase::kForward);
    FakeClock::advance_ms(2);
  }
  const ProfileReport r = again.stop();
  EXPECT_EQ(r.find("failing", Phase::kForward), nullptr);
  EXPECT_DOUBLE_EQ(row(r, "ok", Phase::kForward).self_ms, 2.0);
  EXPECT_THROW((void)again.stop(), Error);
}

TEST(ProfileReport, TableAndJsonCarryEveryRow) {
  ProfileReport r;
  r.wall_ms = 100.0;
  r.rows = {{"linear", Phase::kBackward, 48, 50.0, 50.0},
            {"layernorm", Phase::kForward, 5, 20.0, 20.0},
            {"a \"quoted\"\\name", Phase::kCommunication, 1, 5.0, 7.5}};
  const std::string table = r.table(2);
  EXPECT_NE(table.find("linear"), std::string::npos) << table;
  EXPECT_NE(table.find("backward"), std::string::npos) << table;
  EXPECT_NE(table.find("(1 more rows)"), std::string::npos) << table;
  EXPECT_NE(table.find("coverage 75.0%"), std::string::npos) << table;
  EXPECT_NE(table.find("outside any scope"), std::string::npos) << table;
  EXPECT_NE(table.find("backward 50.0 ms (50.0%)"), std::string::npos) << table;
  EXPECT_EQ(table.find("quoted"), std::string::npos) << table;

  const nlohmann::json j = nlohmann::json::parse(r.json());
  EXPECT_DOUBLE_EQ(j["wall_ms"].get<double>(), 100.0);
  EXPECT_DOUBLE_EQ(j["self_ms"].get<double>(), 75.0);
  EXPECT_DOUBLE_EQ(j["coverage"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(j["phases"]["forward"].get<double>(), 20.0);
  EXPECT_DOUBLE_EQ(j["phases"]["recompute"].get<double>(), 0.0);
  ASSERT_EQ(j["rows"].size(), 3u);
  EXPECT_EQ(j["rows"][0]["name"], "linear");
  EXPECT_EQ(j["rows"][0]["phase"], "backward");
  EXPECT_EQ(j["rows"][0]["calls"], 48);
  EXPECT_EQ(j["rows"][2]["name"], "a \"quoted\"\\name");
  EXPECT_DOUBLE_EQ(j["rows"][2]["total_ms"].get<double>(), 7.5);
}

}  // namespace
}  // namespace trident::profiler
