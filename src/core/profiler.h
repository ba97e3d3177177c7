// A process-wide profiler of named scopes: where the time of a training step goes, per op and
// per phase (forward, backward, recompute, optimizer, communication, data). Off by default.
//
//   profiler::start();
//   { profiler::ProfileScope scope("adamw.step", profiler::Phase::kOptimizer); ... }
//   profiler::ProfileReport report = profiler::stop();   // rows, wall time, table(), json()
//
// Each scope's time is split into self time (outside the scopes nested in it) and total time,
// summed per (name, phase) with a call count (core/profile_report.h). What opens scopes: the
// forward of every differentiable op (autograd/op_scope.h), every backward node and the
// autograd engine, the optimizer, the trainer's batches and parallel/'s collectives.
//
// Note [Profiling one thread]
// Why only the thread that called start() records? Ops are launched from one thread and
// parallelize inside (OpenMP, core/parallel.h): the launching thread's time is the step's
// time, and a scope inside a parallel region would time one chunk of an op that is already
// timed as a whole. So a scope opened on any other thread records nothing and touches no
// shared state (a thread-local says whether this thread records), and the recording needs no
// locks. That makes a scope inside a parallel region safe, not meaningful: the recording
// thread is OpenMP's master, which runs some of the region's chunks itself, so a scope in a
// parallel_for body records only the master's chunks, and its call count and time depend on
// the thread count and the schedule (with one thread it records every chunk). Scopes belong
// around ops, where an op is launched, never inside parallel bodies. What the scopes measure
// is host time: on a GPU, an op's scope times its launch unless something in it synchronizes.
//
// Cost when off: one relaxed atomic load per scope. When on: two clock reads and a hash
// lookup per scope, on the recording thread only.
//
// Not here: the report's rendering (core/profile_report.h); choosing what to profile (the
// trainer's train.profile_step, train_step_bench --profile).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <utility>

#include "core/profile_report.h"

namespace trident::profiler {

namespace detail {
extern std::atomic<bool> g_profiling;  // a session is running (on some thread)
}  // namespace detail

// Whether a profiling session is running. Cheap: scopes call it first.
inline bool enabled() { return detail::g_profiling.load(std::memory_order_relaxed); }

struct ProfilerOptions {
  // Nanoseconds on a monotonic clock; empty: std::chrono::steady_clock. A test seam (as
  // checkpoint/env.h is for files): a fake clock makes self and total times exact.
  std::function<int64_t()> clock_ns;
};

// Starts a session that records the scopes of the calling thread. Throws if a session is
// already running. Thread-safe.
void start(ProfilerOptions options = {});
// Ends the session and returns what it recorded; the wall time runs from start() to here.
// Must be called on the thread that called start() (throws otherwise, or with no session).
// Scopes still open are dropped (their time counts for no row).
ProfileReport stop();

// start() on construction; stop() returns the report. A session still running when the
// object goes (an exception left the profiled code) is stopped and its report dropped, so the
// next start() finds none running.
class ProfileSession {
 public:
  explicit ProfileSession(ProfilerOptions options = {}) { start(std::move(options)); }
  ~ProfileSession();
  ProfileSession(const ProfileSession&) = delete;
  ProfileSession& operator=(const ProfileSession&) = delete;
  ProfileReport stop();

 private:
  bool running_ = true;
};

// Records the time from construction to destruction under (name, phase) when a session is
// running and this is its thread. `name` must stay valid until stop() (a string literal or a
// registered op name): rows are collected by pointer and merged by text at stop().
// Not copyable or movable: a scope is a block of code.
class ProfileScope {
 public:
  ProfileScope(const char* name, Phase phase) {
    if (enabled()) [[unlikely]] open(name, phase);
  }
  ~ProfileScope() {
    if (session_ != 0) [[unlikely]] close();
  }
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  void open(const char* name, Phase phase);
  void close() noexcept;
  uint64_t session_ = 0;  // the session this scope records into; 0: none
};

}  // namespace trident::profiler
