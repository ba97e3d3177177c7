// Reporting the profile of one optimizer step (train.profile_step = N; core/profiler.h): the
// table of the top rows, printed by rank 0, and the whole profile as JSON, written atomically
// by every rank: <out_dir>/profile_step<N>.json on rank 0, profile_step<N>.rank<R>.json on
// rank R > 0 (each rank profiles its own process; their collectives' waits show the others).
#pragma once

#include <cstdint>
#include <string>

#include "core/profile_report.h"
#include "core/status.h"
#include "train/progress.h"

namespace trident::train {

// Where rank `rank` writes the profile of step `step`.
std::string step_profile_path(const std::string& out_dir, int64_t step, int rank);

// The report's JSON (core/profile_report.h) with "step", "rank" and "world_size" added.
std::string step_profile_json(const profiler::ProfileReport& report, int64_t step, int rank, int world_size);

// A heading naming the step (and the rank, when there are several), then report.table(rows),
// without its final newline.
std::string step_profile_table(const profiler::ProfileReport& report, int64_t step, int rank, int world_size,
                               size_t rows = 25);

// Writes step_profile_json() to step_profile_path() (checkpoint/atomic_file.h), creating
// out_dir if needed.
[[nodiscard]] Status write_step_profile(const profiler::ProfileReport& report, const std::string& out_dir, int64_t step,
                                        int rank, int world_size);

// What the trainer does after the profiled step: prints step_profile_table() on `progress`
// (null: no printing; the trainer passes rank 0's) and writes the JSON. A failed write is
// reported on stderr, not returned: a rank that stopped over it would leave the others waiting
// in their next collective, and a profile is not worth a run.
void report_step_profile(const profiler::ProfileReport& report, const std::string& out_dir, int64_t step, int rank,
                         int world_size, Progress* progress);

}  // namespace trident::train
