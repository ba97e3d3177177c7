// `trident report RUN_DIR`: one self-contained HTML file (inline SVG and CSS, no scripts, no
// network) with a run's curves from metrics.jsonl (loss and val loss, learning rate, gradient
// norm, tokens/s, MFU, the step time split into data / forward+backward / communication wait
// / optimizer, communication bytes per step), a mixture of experts' load per layer
// (monitor/report_expert_load.h) and its alerts (alerts.jsonl) and rollbacks marked on the
// same step axis, with a table of the alerts.
//
// Works on a finished or a running run: a last line cut mid-write is skipped. After a
// rollback (Note [Rollback and skip]) the last line of each step is the one plotted.
// Not here: memory by category (the registry and TensorBoard have it; metrics.jsonl does not).
#pragma once

#include <string>

#include "core/status.h"

namespace trident::monitor {

// Writes the report of `run_dir` to `out_html`. Errors name a missing or unreadable
// metrics.jsonl, a malformed line (file:line: not a JSON object, or the key that holds another
// type than the report reads, and that type) and an unwritable output.
[[nodiscard]] Status write_run_report(const std::string& run_dir, const std::string& out_html);

}  // namespace trident::monitor
