#include "comm/flight_recorder.h"

#include <chrono>
#include <cstdio>
#include <regex>
#include <sstream>
#include <thread>

namespace trident::comm {
namespace {

const auto kStart = std::chrono::steady_clock::now();

// Operation names are ASCII without quotes or backslashes; escape them anyway.
std::string json_quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"";
}

}  // namespace

FlightRecorder& flight_recorder() {
  static FlightRecorder r;
  return r;
}

int FlightRecorder::new_communicator() {
  std::lock_guard<std::mutex> lock(mu_);
  next_seq_.push_back(1);
  return static_cast<int>(next_seq_.size()) - 1;
}

int64_t FlightRecorder::started(int comm, int comm_size, const std::string& op, int64_t bytes) {
  const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - kStart).count();
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t seq = next_seq_.at(static_cast<size_t>(comm))++;
  records_.push_back({comm, comm_size, seq, op, bytes, t, false});
  if (records_.size() > static_cast<size_t>(kFlightRecords)) records_.pop_front();
  return seq;
}

void FlightRecorder::sleep_inside(int comm, int64_t seq, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  sleep_comm_ = comm;
  sleep_seq_ = seq;
  sleep_s_ = seconds;
}

void FlightRecorder::completed(int comm, int64_t seq) {
  std::unique_lock<std::mutex> lock(mu_);
  if (comm == sleep_comm_ && seq == sleep_seq_) {
    const double seconds = sleep_s_;
    sleep_comm_ = -1;
    lock.unlock();
    std::fprintf(stderr, "test hook: sleeping %g s inside operation #%lld of communicator %d\n", seconds,
                 static_cast<long long>(seq), comm);
    std::fflush(stderr);
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    lock.lock();
  }
  for (auto it = records_.rbegin(); it != records_.rend(); ++it)
    if (it->comm == comm && it->seq == seq) {
      it->completed = true;
      return;
    }
}

std::deque<FlightRecord> FlightRecorder::records() const {
  std::lock_guard<std::mutex> lock(mu_);
  return records_;
}

std::string FlightRecorder::json() const {
  std::ostringstream os;
  os << "[";
  bool first = true;
  for (const FlightRecord& r : records()) {
    os << (first ? "\n" : ",\n") << "  {\"comm\": " << r.comm << ", \"comm_size\": " << r.comm_size
       << ", \"seq\": " << r.seq << ", \"op\": " << json_quoted(r.op) << ", \"bytes\": " << r.bytes
       << ", \"started_s\": " << r.started_s << ", \"state\": \"" << (r.completed ? "completed" : "in flight")
       << "\"}";
    first = false;
  }
  os << "\n]";
  return os.str();
}

std::string FlightRecorder::text(int n) const {
  const std::deque<FlightRecord> all = records();
  std::ostringstream os;
  const size_t from = all.size() > static_cast<size_t>(n) ? all.size() - static_cast<size_t>(n) : 0;
  for (size_t i = from; i < all.size(); ++i) {
    const FlightRecord& r = all[i];
    char line[256];
    std::snprintf(line, sizeof line, "  comm %d (%d ranks) #%lld %s %lld B at %.3f s: %s\n", r.comm, r.comm_size,
                  static_cast<long long>(r.seq), r.op.c_str(), static_cast<long long>(r.bytes), r.started_s,
                  r.completed ? "completed" : "in flight");
    os << line;
  }
  if (all.empty()) os << "  (no communication recorded)\n";
  return os.str();
}

void FlightRecorder::set_dump_path(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  dump_path_ = path;
  dump_dir_.clear();
}

void FlightRecorder::set_dump_dir(const std::string& dir, int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  dump_dir_ = dir;
  dump_path_ = dir + "/flight_rank" + std::to_string(rank) + ".json";
}

std::string FlightRecorder::dump_path_of(int rank) const {
  std::lock_guard<std::mutex> lock(mu_);
  return dump_dir_.empty() ? std::string() : dump_dir_ + "/flight_rank" + std::to_string(rank) + ".json";
}

std::string FlightRecorder::dump_path() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dump_path_;
}

bool FlightRecorder::write_dump() const {
  const std::string path = dump_path();
  if (path.empty()) return false;
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return false;
  const std::string j = json();
  const bool ok = std::fwrite(j.data(), 1, j.size(), f) == j.size() && std::fputc('\n', f) != EOF;
  if (std::fclose(f) != 0 || !ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

std::optional<std::vector<FlightRecord>> FlightRecorder::parse(const std::string& text) {
  // json()'s own format, one record per line: a reader of the dumps of other ranks of this
  // build, not a general JSON parser (the communication layer has none).
  std::vector<FlightRecord> out;
  static const std::regex line(
      R"re(\{"comm": (-?\d+), "comm_size": (\d+), "seq": (\d+), "op": "((?:[^"\\]|\\.)*)", "bytes": (-?\d+), )re"
      R"re("started_s": ([-+0-9.eE]+), "state": "(completed|in flight)"\})re");
  size_t pos = text.find('[');
  if (pos == std::string::npos || text.find(']', pos) == std::string::npos) return std::nullopt;
  std::istringstream lines(text.substr(pos + 1));
  for (std::string l; std::getline(lines, l);) {
    std::smatch m;
    if (std::regex_search(l, m, line)) {
      FlightRecord r;
      r.comm = std::stoi(m[1].str());
      r.comm_size = std::stoi(m[2].str());
      r.seq = std::stoll(m[3].str());
      for (size_t i = 0; i < m[4].str().size(); ++i) {
        const char c = m[4].str()[i];
        if (c != '\\') r.op += c;
        else if (i + 1 < m[4].str().size()) r.op += m[4].str()[++i];
      }
      r.bytes = std::stoll(m[5].str());
      r.started_s = std::stod(m[6].str());
      r.completed = m[7].str() == "completed";
      out.push_back(std::move(r));
    } else if (l.find('{') != std::string::npos) {
      return std::nullopt;  // a record in another format
    }
  }
  return out;
}

}  // namespace trident::comm
