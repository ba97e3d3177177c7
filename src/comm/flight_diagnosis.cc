#include "comm/flight_diagnosis.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

namespace trident::comm {
namespace {

std::string rank_list(const std::vector<int>& ranks) {
  std::ostringstream os;
  os << (ranks.size() == 1 ? "rank " : "ranks ");
  for (size_t i = 0; i < ranks.size(); ++i)
    os << (i == 0 ? "" : i + 1 == ranks.size() ? " and " : ", ") << ranks[i];
  return os.str();
}

const FlightRecord* find(const std::vector<FlightRecord>& records, int comm, int64_t seq) {
  for (const FlightRecord& r : records)
    if (r.comm == comm && r.seq == seq) return &r;
  return nullptr;
}

}  // namespace

FlightDiagnosis diagnose_flight_records(const std::map<int, std::vector<FlightRecord>>& by_rank) {
  FlightDiagnosis d;
  std::set<int> comms;
  for (const auto& [rank, records] : by_rank)
    for (const FlightRecord& r : records) comms.insert(r.comm);
  for (int comm : comms) {
    std::map<int, int64_t> last;  // rank -> its last number on `comm`
    int comm_size = 0;
    // Every rank is in the world (communicator 0): one without a record there never got as
    // far as its first operation. Other communicators' members are the ranks that used them.
    if (comm == 0)
      for (const auto& [rank, records] : by_rank) last[rank] = 0;
    for (const auto& [rank, records] : by_rank)
      for (const FlightRecord& r : records)
        if (r.comm == comm) {
          last[rank] = std::max(last[rank], r.seq);
          comm_size = r.comm_size;
        }
    if (last.size() < 2) continue;
    const auto [lo, hi] = std::minmax_element(
        last.begin(), last.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
    if (lo->second == hi->second) continue;
    d.found = true;
    d.comm = comm;
    d.comm_size = comm_size;
    d.behind_seq = lo->second;
    for (const auto& [rank, seq] : last) (seq == d.behind_seq ? d.behind : d.ahead).push_back(rank);
    if (const FlightRecord* r = find(by_rank.at(d.behind.front()), comm, d.behind_seq)) {
      d.behind_op = r->op;
      d.behind_state = r->completed ? "completed" : "in flight";
    }
    if (const FlightRecord* r = find(by_rank.at(d.ahead.front()), comm, d.behind_seq + 1))
      d.waited_op = r->op;
    std::ostringstream os;
    os << rank_list(d.behind) << (d.behind.size() == 1 ? " is" : " are")
       << " behind on communicator " << comm << " (" << comm_size
       << " ranks): " << (d.behind.size() == 1 ? "its" : "their") << " last operation there is #"
       << d.behind_seq;
    if (!d.behind_op.empty()) os << " " << d.behind_op << " (" << d.behind_state << ")";
    os << "; " << rank_list(d.ahead) << " went on to #" << d.behind_seq + 1;
    if (!d.waited_op.empty()) os << " " << d.waited_op;
    os << ", which " << rank_list(d.behind) << " never started";
    d.text = os.str();
    return d;
  }
  d.text = by_rank.size() < 2
               ? "fewer than two ranks' flight records: nothing to compare"
               : "no rank is behind: every rank reached the same operation on every communicator "
                 "(the hang is outside communication, or in an operation every rank entered)";
  return d;
}

namespace {

// A dump of another rank written since `not_before`, whole (dumps are renamed into place).
std::optional<std::vector<FlightRecord>> read_dump(const std::string& path, double not_before) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  const double mtime = static_cast<double>(st.st_mtim.tv_sec) + 1e-9 * static_cast<double>(st.st_mtim.tv_nsec);
  if (mtime < not_before) return std::nullopt;  // an earlier timeout's, or another run's
  std::ifstream f(path);
  std::stringstream text;
  text << f.rdbuf();
  return FlightRecorder::parse(text.str());
}

}  // namespace

std::string name_stalled_ranks(const FlightRecorder& recorder, int world_size, double grace_s, double not_before) {
  if (recorder.dump_path_of(0).empty() || world_size < 2) return "";
  std::map<int, std::vector<FlightRecord>> by_rank;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s);
  for (;;) {
    for (int r = 0; r < world_size; ++r)
      if (by_rank.count(r) == 0)
        if (auto got = read_dump(recorder.dump_path_of(r), not_before)) by_rank[r] = std::move(*got);
    if (static_cast<int>(by_rank.size()) == world_size || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::vector<int> silent;
  for (int r = 0; r < world_size; ++r)
    if (by_rank.count(r) == 0) silent.push_back(r);
  if (silent.empty()) return diagnose_flight_records(by_rank).text;
  std::ostringstream os;
  os << rank_list(silent) << " stopped taking part: "
     << (silent.size() == 1 ? "it wrote" : "they wrote") << " no flight record within " << grace_s
     << " s of this timeout, so " << (silent.size() == 1 ? "it is" : "they are")
     << " not waiting in any communication (busy elsewhere, stopped, or gone; or on a host that does not share "
     << "train.out_dir)";
  return os.str();
}

}  // namespace trident::comm
