// `trident report`: a run's metrics and alerts as one self-contained HTML file
// (monitor/run_report.h).
#include <cstdio>

#include "commands.h"
#include "monitor/run_report.h"

namespace trident::cli {

CLI::App* add_report(CLI::App& app, ReportArgs& a) {
  CLI::App* c = app.add_subcommand("report", "Write a run's curves and alerts as one self-contained HTML file");
  c->add_option("run_dir", a.run_dir, "the run's train.out_dir (finished or still running)")->required();
  c->add_option("--out", a.out, "the HTML file to write (default: RUN_DIR/report.html)");
  return c;
}

Status run_report(const ReportArgs& a) {
  const std::string out = a.out.empty() ? a.run_dir + "/report.html" : a.out;
  // The report is written after the run's files are read: over one of them, it would replace it.
  for (const char* name : {"metrics.jsonl", "alerts.jsonl"})
    if (const std::string in = a.run_dir + "/" + name; resolved_path(out) == resolved_path(in))
      return Status::invalid("report: --out '" + out + "' is the run's " + name + " ('" + in +
                             "'), which the report reads: choose another --out");
  if (Status s = monitor::write_run_report(a.run_dir, out); !s.is_ok()) return s;
  std::printf("wrote %s\n", out.c_str());
  return Status::ok();
}

}  // namespace trident::cli
