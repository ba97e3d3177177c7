#include "train/metrics.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
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
