#include "train/metrics.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/check.h"

namespace trident::train {

StatusOr<MetricsWriter> MetricsWriter::open(const std::string& path) {
  if (path.empty()) return MetricsWriter(nullptr);
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (f == nullptr) return Status::io_error("cannot open metrics file '" + path + "': " + std::strerror(errno));
  return MetricsWriter(f);
}

MetricsWriter::~MetricsWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

// The shortest decimal that reads back as the same double (so two runs' losses compare bit
// for bit from their metrics). JSON has no NaN/Infinity: write null so every line stays
// parseable.
// `quoted`: the key comes as a JSON string already (quoted and escaped).
static void put_number(std::FILE* f, const char* key, double v, bool last = false, bool quoted = false) {
  char buf[32] = "null";
  if (std::isfinite(v)) *std::to_chars(buf, buf + sizeof buf - 1, v).ptr = '\0';
  std::fprintf(f, quoted ? "%s: %s%s" : "\"%s\": %s%s", key, buf, last ? "" : ", ");
}

void MetricsWriter::write_step(const StepMetrics& m) {
  if (file_ == nullptr) return;
  std::fprintf(file_, "{\"step\": %lld, ", static_cast<long long>(m.step));
  put_number(file_, "loss", m.loss);
  put_number(file_, "lr", m.lr);
  put_number(file_, "grad_norm", m.grad_norm);
  put_number(file_, "tokens_per_s", m.tokens_per_s);
  if (m.mfu.has_value()) put_number(file_, "mfu", *m.mfu);
  if (m.comm_bytes.has_value()) std::fprintf(file_, "\"comm_bytes\": %lld, ", static_cast<long long>(*m.comm_bytes));
  if (m.comm_sent_bytes.has_value())
    std::fprintf(file_, "\"comm_sent_bytes\": %lld, ", static_cast<long long>(*m.comm_sent_bytes));
  if (m.nvme.has_value()) {
    std::fprintf(file_, "\"nvme\": {\"read_bytes\": %lld, \"written_bytes\": %lld, ",
                 static_cast<long long>(m.nvme->read_bytes), static_cast<long long>(m.nvme->written_bytes));
    std::fprintf(file_, "\"wait_s\": %.17g}, ", m.nvme->wait_s);
  }
  if (m.loss_scale.has_value()) {
    put_number(file_, "loss_scale", *m.loss_scale);
    std::fprintf(file_, "\"skipped\": %s, \"skipped_steps\": %lld, ", m.skipped ? "true" : "false",
                 static_cast<long long>(m.skipped_steps));
  }
  if (!m.aux.empty()) {  // {"name": mean, ...}: only when the model recorded any
    std::fprintf(file_, "\"aux\": {");
    bool first = true;
    for (const auto& [name, mean] : m.aux) {
      std::fprintf(file_, "%s", first ? "" : ", ");
      put_number(file_, nlohmann::json(name).dump().c_str(), mean, /*last=*/true, /*quoted=*/true);
      first = false;
    }
    std::fprintf(file_, "}, ");
  }
  if (!m.moe_layers.empty())  // [{"layer": L, "tokens": [...], "dropped": n, ...}, ...]
    std::fprintf(file_, "\"moe_layers\": %s, ", moe_layers_to_json(m.moe_layers).c_str());
  put_number(file_, "step_s", m.step_s);
  put_number(file_, "data_s", m.data_s);
  put_number(file_, "forward_backward_s", m.forward_backward_s);
  put_number(file_, "comm_wait_s", m.comm_wait_s);
  put_number(file_, "optimizer_s", m.optimizer_s);
  if (m.memory.has_value()) {
    // {"parameter": ..., ..., "peak": ..., "reserved": ..., "rss": ...} and per category peaks.
    const StepMetrics::Memory& mem = *m.memory;
    std::fprintf(file_, "\"memory_bytes\": {");
    for (int c = 0; c < kNumMemoryCategories; ++c)
      std::fprintf(file_, "\"%s\": %lld, ", memory_category_name(static_cast<MemoryCategory>(c)),
                   static_cast<long long>(mem.bytes[c]));
    std::fprintf(file_, "\"peak\": %lld, \"reserved\": %lld", static_cast<long long>(mem.peak),
                 static_cast<long long>(mem.reserved));
    if (mem.limit > 0) std::fprintf(file_, ", \"limit\": %lld", static_cast<long long>(mem.limit));
    if (mem.rss.has_value()) std::fprintf(file_, ", \"rss\": %lld", static_cast<long long>(*mem.rss));
    std::fprintf(file_, "}, \"memory_peak_bytes\": {");
    for (int c = 0; c < kNumMemoryCategories; ++c)
      std::fprintf(file_, "%s\"%s\": %lld", c == 0 ? "" : ", ", memory_category_name(static_cast<MemoryCategory>(c)),
                   static_cast<long long>(mem.peak_bytes[c]));
    std::fprintf(file_, "}, ");
  }
  put_number(file_, "elapsed_s", m.elapsed_s, true);
  std::fprintf(file_, "}\n");
  std::fflush(file_);
}

void MetricsWriter::write_eval(int64_t step, double val_loss) {
  if (file_ == nullptr) return;
  std::fprintf(file_, "{\"step\": %lld, ", static_cast<long long>(step));
  put_number(file_, "val_loss", val_loss, true);
  std::fprintf(file_, "}\n");
  std::fflush(file_);
}

void MetricsWriter::write_rollback(int64_t from_step, int64_t to_step) {
  if (file_ == nullptr) return;
  std::fprintf(file_, "{\"rollback\": {\"from_step\": %lld, \"to_step\": %lld}}\n", static_cast<long long>(from_step),
               static_cast<long long>(to_step));
  std::fflush(file_);
}

// Note [Metrics on resume]
// Q: A run stopped after step N (preempted, killed, crashed) resumes from its newest checkpoint
// at step C <= N. Steps C+1..N are trained again, and MetricsWriter appends. What becomes of
// the lines of C+1..N already in metrics.jsonl?
// A: They are removed before the resumed run writes anything (Trainer::run, rank 0, under the
// out_dir lock of train/run_lock.h), so the file holds each step once and a resumed run's file
// equals an uninterrupted run's but for timing fields (tests/train/run_folder_test.py). The
// same call with C = 0 gives a run that starts afresh (train.resume = false, or nothing to
// resume) an empty file instead of a stale run's lines below its own.
// Rollbacks (Note [Rollback and skip]) are history, not staleness: a rollback line
// {"rollback": {"from_step": F, "to_step": R, ...}} follows the discarded steps R+1..F, which
// the report draws apart. So the file is cut only in the trajectory C belongs to: everything
// up to the last rollback line with to_step <= C stays as written; after it, step and
// evaluation lines of steps > C go, and so do rollback lines to steps > C (a trajectory the
// checkpoint does not descend from). A line that is not a JSON object (the last line cut
// mid-write, or such a line that the old append-only writer joined to the next run's first
// line) is removed: `trident report` refuses a malformed line, and one was the reason a resumed
// run had no report. The file is rewritten only when something changes, atomically (leveldb's
// temp-sync-rename).
namespace {

Status io_failure(const std::string& what, const std::string& path) {
  return Status::io_error("reconciling metrics: cannot " + what + " '" + path + "': " + std::strerror(errno));
}

// `text` to `path` atomically: `path`.tmp, fsync, rename over `path`, fsync the directory.
Status replace_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return io_failure("create", tmp);
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const Status s = io_failure("write", tmp);
      ::close(fd);
      return s;
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const Status s = io_failure("fsync", tmp);
    ::close(fd);
    return s;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return io_failure("rename " + tmp + " over", path);
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return io_failure("open the directory", dir);
  const int rc = ::fsync(dfd);
  ::close(dfd);
  if (rc != 0) return io_failure("fsync the directory", dir);
  return Status::ok();
}

}  // namespace

StatusOr<MetricsReconcile> reconcile_metrics(const std::string& path, int64_t step) {
  MetricsReconcile out;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    if (ec) return Status::io_error("reconciling metrics: cannot look for '" + path + "': " + ec.message());
    return out;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_failure("open", path);
  std::stringstream buf;
  buf << in.rdbuf();
  if (in.bad()) return io_failure("read", path);
  const std::string text = std::move(buf).str();
  // Each line and what it is: a step or evaluation line (its step), a rollback (its to_step),
  // something else (kept), or not a JSON object (removed).
  enum class Kind { kStep, kRollback, kOther, kBroken };
  struct Line {
    std::string_view text;  // with its newline
    Kind kind;
    int64_t step;
  };
  std::vector<Line> lines;
  for (size_t at = 0; at < text.size();) {
    const size_t end = text.find('\n', at);
    const std::string_view s(text.data() + at, (end == std::string::npos ? text.size() : end + 1) - at);
    at += s.size();
    Line l{s, Kind::kOther, 0};
    const nlohmann::json j = nlohmann::json::parse(s, nullptr, /*allow_exceptions=*/false);
    if (end == std::string::npos || !j.is_object()) {  // no newline: cut mid-write
      if (s.find_first_not_of(" \t\r\n") != std::string_view::npos) l.kind = Kind::kBroken;
      else if (end == std::string::npos) continue;  // trailing blanks
    } else if (j.contains("rollback") && j["rollback"].is_object() && j["rollback"].contains("to_step") &&
               j["rollback"]["to_step"].is_number_integer()) {
      l = {s, Kind::kRollback, j["rollback"]["to_step"].get<int64_t>()};
    } else if (j.contains("step") && j["step"].is_number_integer()) {
      l = {s, Kind::kStep, j["step"].get<int64_t>()};
    }
    lines.push_back(l);
  }
  // Lines up to the last rollback into this step's past are history (Note [Metrics on resume]).
  size_t history = 0;
  for (size_t i = 0; i < lines.size(); ++i)
    if (lines[i].kind == Kind::kRollback && lines[i].step <= step) history = i + 1;
  std::string kept;
  kept.reserve(text.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    const Line& l = lines[i];
    bool keep = l.kind != Kind::kBroken;
    if (keep && i >= history && (l.kind == Kind::kStep || l.kind == Kind::kRollback)) keep = l.step <= step;
    if (keep) {
      kept += l.text;
      ++out.kept;
    } else {
      ++(l.kind == Kind::kBroken ? out.torn : out.removed);
    }
  }
  if (kept.size() == text.size()) return out;  // nothing removed (lines are only ever dropped)
  if (Status s = replace_file(path, kept); !s.is_ok()) return s;
  out.rewritten = true;
  return out;
}

std::string aux_values_to_json(const nn::AuxValues& values) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, v] : values) j[name] = {v.sum, v.count};
  return j.dump();
}

std::map<std::string, double> merge_aux_values(const std::vector<std::string>& per_rank) {
  nn::AuxValues total;
  for (size_t r = 0; r < per_rank.size(); ++r) {
    const nlohmann::json j = nlohmann::json::parse(per_rank[r], nullptr, /*allow_exceptions=*/false);
    TRI_CHECK(j.is_object(), "auxiliary values of rank ", r, " are not a JSON object: '", per_rank[r], "'");
    for (const auto& [name, v] : j.items()) {
      // A non-finite sum (an fp16 overflow) travels as null.
      TRI_CHECK(v.is_array() && v.size() == 2 && (v[0].is_number() || v[0].is_null()) && v[1].is_number_integer(),
                "auxiliary value '", name, "' of rank ", r, " is not [sum, count]: ", v.dump());
      nn::AuxValue& t = total[name];
      t.sum += v[0].is_null() ? std::numeric_limits<double>::quiet_NaN() : v[0].get<double>();
      t.count += v[1].get<int64_t>();
    }
  }
  std::map<std::string, double> means;
  for (const auto& [name, v] : total) means[name] = v.mean();
  return means;
}

}  // namespace trident::train
