#include "monitor/process_stats.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

namespace trident::monitor {
namespace {

std::string read_text(const char* path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::optional<double> parse_proc_stat_cpu_seconds(const std::string& stat, long ticks_per_second) {
  // Fields after the command name, which is in parentheses and may hold spaces: state is
  // field 3; utime and stime are fields 14 and 15.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos || ticks_per_second <= 0) return std::nullopt;
  std::istringstream in(stat.substr(close + 1));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15; ++i) {
    if (!(in >> field)) return std::nullopt;
    if (i == 14 || i == 15) {
      try {
        (i == 14 ? utime : stime) = std::stod(field);
      } catch (...) {
        return std::nullopt;
      }
    }
  }
  return (utime + stime) / static_cast<double>(ticks_per_second);
}

std::optional<int64_t> parse_status_kib(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with(key + ":")) continue;
    std::istringstream fields(line.substr(key.size() + 1));
    int64_t kib = 0;
    if (fields >> kib) return kib * 1024;
    return std::nullopt;
  }
  return std::nullopt;
}

std::vector<ProcessStats::Interface> parse_net_dev(const std::string& text) {
  // Two header lines, then "  name: rx_bytes rx_packets ... (8 receive fields) tx_bytes ...".
  std::vector<ProcessStats::Interface> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    ProcessStats::Interface iface;
    const size_t start = line.find_first_not_of(' ');
    iface.name = line.substr(start, colon - start);
    std::istringstream fields(line.substr(colon + 1));
    int64_t v[9];
    bool ok = true;
    for (int64_t& x : v) ok = ok && static_cast<bool>(fields >> x);
    if (!ok) continue;
    iface.receive_bytes = v[0];
    iface.transmit_bytes = v[8];
    out.push_back(iface);
  }
  return out;
}

ProcessStats read_process_stats() {
  ProcessStats s;
  s.cpu_seconds = parse_proc_stat_cpu_seconds(read_text("/proc/self/stat"), sysconf(_SC_CLK_TCK));
  s.rss_bytes = parse_status_kib(read_text("/proc/self/status"), "VmRSS");
  const std::string meminfo = read_text("/proc/meminfo");
  s.host_memory_total_bytes = parse_status_kib(meminfo, "MemTotal");
  s.host_memory_available_bytes = parse_status_kib(meminfo, "MemAvailable");
  s.network = parse_net_dev(read_text("/proc/net/dev"));
  return s;
}

}  // namespace trident::monitor
