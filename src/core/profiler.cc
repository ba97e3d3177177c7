#include "core/profiler.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/check.h"

namespace trident::profiler {

std::atomic<bool> detail::g_profiling{false};

namespace {

struct Key {
  const char* name;
  Phase phase;
  bool operator==(const Key& o) const { return name == o.name && phase == o.phase; }
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    return std::hash<const void*>()(k.name) ^ (static_cast<size_t>(k.phase) * 0x9e3779b97f4a7c15ull);
  }
};

struct Stat {
  int64_t calls = 0, self_ns = 0, total_ns = 0;
  int open = 0;  // frames of this key on the stack: a nested one adds no total time
};

struct Frame {
  Stat* stat;
  int64_t start_ns;
  int64_t child_ns = 0;  // total time of the scopes nested directly in this one
};

// Touched by the recording thread alone between start() and stop() (Note [Profiling one
// thread]); start() and stop() hold `mu` against each other and against other threads.
struct Session {
  std::mutex mu;
  uint64_t id = 0;  // of the running session, or of the last one
  std::thread::id owner;
  std::function<int64_t()> clock;
  int64_t start_ns = 0;
  std::vector<Frame> stack;
  std::unordered_map<Key, Stat, KeyHash> stats;  // node-based: Stat pointers stay valid

  int64_t now() const {
    if (clock) return clock();
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

Session& session() {
  static Session* s = new Session();  // never destroyed: scopes may close during static destruction
  return *s;
}

// The session this thread records into (0: none). Set by start(), cleared by stop().
thread_local uint64_t t_session = 0;

}  // namespace

void start(ProfilerOptions options) {
  Session& s = session();
  std::lock_guard<std::mutex> lock(s.mu);
  TRI_CHECK(!detail::g_profiling.load(std::memory_order_relaxed),
            "profiler::start: a profiling session is already running; stop() it first");
  s.id += 1;
  s.owner = std::this_thread::get_id();
  s.clock = std::move(options.clock_ns);
  s.stack.clear();
  s.stats.clear();
  t_session = s.id;
  s.start_ns = s.now();
  detail::g_profiling.store(true, std::memory_order_relaxed);
}

ProfileReport stop() {
  Session& s = session();
  std::lock_guard<std::mutex> lock(s.mu);
  TRI_CHECK(detail::g_profiling.load(std::memory_order_relaxed), "profiler::stop: no profiling session is running");
  TRI_CHECK(s.owner == std::this_thread::get_id(),
            "profiler::stop: called on another thread than the one that called start()");
  const int64_t end_ns = s.now();
  detail::g_profiling.store(false, std::memory_order_relaxed);
  t_session = 0;

  // Rows by (text, phase): two pointers to the same text (a name in two translation units)
  // are one row.
  std::map<std::pair<std::string, Phase>, ProfileRow> merged;
  for (const auto& [key, stat] : s.stats) {
    if (stat.calls == 0) continue;  // only ever open: dropped
    ProfileRow& row = merged[{key.name, key.phase}];
    row.name = key.name;
    row.phase = key.phase;
    row.calls += stat.calls;
    row.self_ms += static_cast<double>(stat.self_ns) * 1e-6;
    row.total_ms += static_cast<double>(stat.total_ns) * 1e-6;
  }
  ProfileReport report;
  report.wall_ms = static_cast<double>(end_ns - s.start_ns) * 1e-6;
  for (auto& [key, row] : merged) report.rows.push_back(std::move(row));
  std::stable_sort(report.rows.begin(), report.rows.end(),
                   [](const ProfileRow& a, const ProfileRow& b) { return a.self_ms > b.self_ms; });
  s.stack.clear();
  s.stats.clear();
  s.clock = nullptr;
  return report;
}

ProfileSession::~ProfileSession() {
  if (!running_) return;
  try {
    (void)profiler::stop();
  } catch (...) {  // destructors must not throw; stop() fails only on another thread
  }
}

ProfileReport ProfileSession::stop() {
  TRI_CHECK(running_, "ProfileSession::stop: already stopped");
  running_ = false;
  return profiler::stop();
}

void ProfileScope::open(const char* name, Phase phase) {
  if (t_session == 0) return;  // not the recording thread
  Session& s = session();
  // Exception-safe: nothing is counted until the frame is on the stack. A throwing insert or
  // push_back leaves no trace; one after `++stat.open` would leave the key's open count above
  // its frames, and the key would never add total time again this session.
  Stat& stat = s.stats[Key{name, phase}];  // strong guarantee: on a throw, no key was added
  s.stack.push_back(Frame{&stat, 0});      // strong guarantee: on a throw, the stack is as it was
  ++stat.open;
  try {
    s.stack.back().start_ns = s.now();  // last: the bookkeeping above is the parent's time
  } catch (...) {                       // a test clock (ProfilerOptions::clock_ns) may throw
    --stat.open;
    s.stack.pop_back();
    throw;
  }
  session_ = t_session;  // only now: the destructor closes the frame
}

void ProfileScope::close() noexcept {
  // A session stopped (or another one started) since this scope opened: its frame is gone.
  if (session_ != t_session) return;
  Session& s = session();
  const int64_t end_ns = s.now();
  const Frame f = s.stack.back();
  s.stack.pop_back();
  const int64_t elapsed = end_ns - f.start_ns;
  f.stat->calls += 1;
  f.stat->self_ns += elapsed - f.child_ns;
  if (--f.stat->open == 0) f.stat->total_ns += elapsed;
  if (!s.stack.empty()) s.stack.back().child_ns += elapsed;
}

}  // namespace trident::profiler
