// What a profiling session measured (core/profiler.h records it): one row per (scope name,
// phase) with its calls, self time (exclusive of the scopes nested in it) and total time, and
// the wall time of the session. Self times partition the time spent inside any scope, so
// their sum over the wall time is the profile's coverage: how much of the session the rows
// explain. Renders as a text table (torch.profiler's key_averages().table()) and as JSON.
//
// Not here: recording (core/profiler.h), where the profiles are written (train/, bench/).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace trident::profiler {

// What part of a training step a scope belongs to. A scope's phase is given where it is
// opened; it does not follow from the enclosing scope (a collective inside a backward node
// is kCommunication).
enum class Phase : uint8_t {
  kForward,        // an op's forward (also under no_grad: evaluation)
  kBackward,       // a backward node, and the autograd engine around the nodes
  kRecompute,      // a forward rerun by activation checkpointing inside the backward
  kOptimizer,      // AdamW, clipping, mixed precision's master weights, zeroing gradients
  kCommunication,  // collectives and point-to-point transfers between ranks
  kData,           // reading and placing a batch
  kOther,
};
inline constexpr int kNumPhases = 7;
const char* phase_name(Phase phase);

struct ProfileRow {
  std::string name;
  Phase phase = Phase::kOther;
  int64_t calls = 0;
  double self_ms = 0.0;   // inside this scope and in none nested in it
  double total_ms = 0.0;  // inside this scope (a scope nested in one of its own key counts once)
};

struct ProfileReport {
  std::vector<ProfileRow> rows;  // largest self time first (ties: by name, then phase)
  double wall_ms = 0.0;          // between start() and stop()

  // The sum of the rows' self times: the time spent inside any scope.
  double self_ms() const;
  // self_ms() / wall_ms: 1 when every moment of the session was inside some scope.
  double coverage() const;
  // The summed self time of the rows of `phase`.
  double phase_ms(Phase phase) const;
  // The row of (name, phase), or null.
  const ProfileRow* find(std::string_view name, Phase phase) const;

  // The first `max_rows` rows as an aligned table (name, phase, calls, self ms, self % of the
  // wall time, total ms), a line for the rest, the total with the coverage, what no scope
  // covered, and the time of each phase.
  std::string table(size_t max_rows = 25) const;
  // {"wall_ms", "self_ms", "coverage", "phases": {phase: self ms}, "rows": [{"name", "phase",
  //  "calls", "self_ms", "total_ms"}]}
  std::string json() const;
};

}  // namespace trident::profiler
