#include "train/step_profile.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "checkpoint/atomic_file.h"

namespace trident::train {

std::string step_profile_path(const std::string& out_dir, int64_t step, int rank) {
  const std::string suffix = rank == 0 ? "" : ".rank" + std::to_string(rank);
  return out_dir + "/profile_step" + std::to_string(step) + suffix + ".json";
}

std::string step_profile_json(const profiler::ProfileReport& report, int64_t step, int rank, int world_size) {
  nlohmann::ordered_json j = {{"step", step}, {"rank", rank}, {"world_size", world_size}};
  j.update(nlohmann::ordered_json::parse(report.json()));
  return j.dump(1) + "\n";
}

std::string step_profile_table(const profiler::ProfileReport& report, int64_t step, int rank, int world_size,
                               size_t rows) {
  std::string heading = "profile of step " + std::to_string(step);
  if (world_size > 1)
    heading += " on rank " + std::to_string(rank) + " of " + std::to_string(world_size) +
               " (every rank writes its own profile_step" + std::to_string(step) + "*.json)";
  std::string table = report.table(rows);
  if (!table.empty() && table.back() == '\n') table.pop_back();  // a message line adds its own
  return heading + ":\n" + table;
}

Status write_step_profile(const profiler::ProfileReport& report, const std::string& out_dir, int64_t step, int rank,
                          int world_size) {
  const std::string path = step_profile_path(out_dir, step, rank);
  Status made = checkpoint::create_dirs(checkpoint::default_env(), out_dir);  // rank 0's may not be ours
  if (!made.is_ok()) return made;
  auto written = checkpoint::write_file_atomically(checkpoint::default_env(), path,
                                                   step_profile_json(report, step, rank, world_size));
  if (!written.is_ok()) return written.status();
  return Status::ok();
}

void report_step_profile(const profiler::ProfileReport& report, const std::string& out_dir, int64_t step, int rank,
                         int world_size, Progress* progress) {
  if (progress != nullptr) progress->message(step_profile_table(report, step, rank, world_size));
  const Status s = write_step_profile(report, out_dir, step, rank, world_size);
  if (!s.is_ok())
    std::fprintf(stderr, "trident: rank %d: the profile of step %lld was not written: %s\n", rank,
                 static_cast<long long>(step), s.to_string().c_str());
}

}  // namespace trident::train
