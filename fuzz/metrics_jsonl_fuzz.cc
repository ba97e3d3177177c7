// Fuzzes what reads a run folder's metrics.jsonl and alerts.jsonl: the reconcile of a resumed
// run (train/metrics.h reconcile_metrics: a torn last line, stale runs' lines, rollback
// history) and `trident report` (monitor/run_report.h). Both files are written by trident, but
// a crash, a full disk or a person's editor can leave anything in them.
// Input: the first byte is the step to reconcile to (0..31), the rest is metrics.jsonl; the
// same bytes are alerts.jsonl. Reconciling a second time must change nothing (the first left
// each kept line whole and in order), and the report must return, whatever it says.
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "monitor/run_report.h"
#include "train/metrics.h"

using namespace trident;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int64_t step = data[0] % 32;
  const std::string_view text = fuzz::as_text(data + 1, size - 1);
  const std::string path = fuzz::write_scratch_file("metrics.jsonl", text);
  fuzz::write_scratch_file("alerts.jsonl", text);
  auto first = train::reconcile_metrics(path, step);
  if (first.is_ok()) {
    auto again = train::reconcile_metrics(path, step);
    if (!again.is_ok()) fuzz::fail("the second reconcile failed: " + again.status().to_string());
    if (again.value().rewritten || again.value().removed != 0 || again.value().torn != 0)
      fuzz::fail("reconciling twice changed the file again: removed " + std::to_string(again.value().removed) +
                 ", torn " + std::to_string(again.value().torn));
  }
  (void)monitor::write_run_report(fuzz::scratch_dir(), fuzz::scratch_dir() + "/report.html");
  return 0;
}
