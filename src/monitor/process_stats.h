// What the machine says about this process and host, read from Linux's /proc: the
// process's CPU seconds and resident memory, the host's memory, and bytes per network
// interface. Each read opens and parses small text files (tens of microseconds), so the
// trainer samples at most once a second, not every step.
//
// Not here: GPUs (NVML), other operating systems (fields stay unset there).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace trident::monitor {

struct ProcessStats {
  std::optional<double> cpu_seconds;        // user + system time of this process so far
  std::optional<int64_t> rss_bytes;         // resident set size (VmRSS)
  std::optional<int64_t> host_memory_total_bytes;
  std::optional<int64_t> host_memory_available_bytes;
  struct Interface {
    std::string name;
    int64_t receive_bytes = 0, transmit_bytes = 0;
  };
  std::vector<Interface> network;           // /proc/net/dev, in its order
};

ProcessStats read_process_stats();

// The parsers behind it, for tests: the texts of /proc/self/stat (with the clock ticks per
// second), /proc/self/status, /proc/meminfo and /proc/net/dev.
std::optional<double> parse_proc_stat_cpu_seconds(const std::string& stat, long ticks_per_second);
std::optional<int64_t> parse_status_kib(const std::string& text, const std::string& key);  // bytes of "key: N kB"
std::vector<ProcessStats::Interface> parse_net_dev(const std::string& text);

}  // namespace trident::monitor
