// A decoding step's attention alone (ops::attention_decode over a paged cache, as infer::KvCache
// calls it): Tq new queries per row against the row's cached keys, at GPT-2 124M's heads (NH = NKV
// = 12, HS = 64) and the 125M LLaMA's (NH = 12, NKV = 4), B rows of different lengths (128 + 8 b
// + 31 keys: decode_compare.py's prompts half-way through their new tokens), one layer's call.
// Tq <= kDecodeQueries runs the decode-shaped path (Note [Decode-shaped attention]); Tq =
// kDecodeQueries + 1 runs the tiled path, whose cost is about the same for any Tq up to its 64-row
// query tile, so it stands for what a one-query step cost before (the ratio printed). Prints
// JSON: per shape and Tq, the median wall and process CPU microseconds per call (CPU time is
// what a loaded machine distorts least) and the CPU-time ratio of the tiled call to this one.
//
// Usage: attention_decode_bench [--threads T] [--reps R] [--B B]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/factory.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "kernels/cpu/attention.h"
#include "ops/attention.h"

using namespace trident;

namespace {

struct Heads {
  const char* name;
  int64_t NH, NKV, HS;
};

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

nlohmann::json run(const Heads& h, int64_t B, int64_t Tq, int reps) {
  constexpr int64_t kBlock = 64;
  std::vector<int64_t> lengths;  // keys per row after this step's Tq
  for (int64_t b = 0; b < B; ++b) lengths.push_back(128 + 8 * b + 31);
  const int64_t T = *std::max_element(lengths.begin(), lengths.end()), per_row = (T + kBlock - 1) / kBlock;
  Generator gen(1);
  const Tensor k_pool = randn({B * per_row, h.NKV, kBlock, h.HS}, gen), v_pool = randn({B * per_row, h.NKV, kBlock, h.HS}, gen);
  const Tensor q = randn({B, h.NH, Tq, h.HS}, gen);
  std::vector<int64_t> table, starts;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t i = 0; i < per_row; ++i) table.push_back(i * B + b);  // rows' blocks interleaved, as a pool hands them out
    starts.push_back(lengths[static_cast<size_t>(b)] - Tq);
  }
  const Tensor table_t = from_vector(table, {B, per_row}), starts_t = from_vector(starts, {B});
  auto call = [&] { return ops::attention_decode(q, k_pool, v_pool, {table_t, T}, starts_t); };
  for (int i = 0; i < 3; ++i) call();
  std::vector<double> wall, cpu;
  for (int r = 0; r < reps; ++r) {
    const double c0 = cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    call();
    wall.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e6);
    cpu.push_back((cpu_seconds() - c0) * 1e6);
  }
  return {{"Tq", Tq}, {"path", Tq <= kernels::cpu::kDecodeQueries ? "decode" : "tiled"},
          {"wall_us", median(wall)}, {"cpu_us", median(cpu)}};
}

}  // namespace

int main(int argc, char** argv) {
  int64_t threads = 2, B = 8;
  int reps = 200;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--threads") threads = std::stoll(next());
    else if (a == "--reps") reps = std::stoi(next());
    else if (a == "--B") B = std::stoll(next());
    else {
      std::fprintf(stderr, "unknown flag %s; usage: attention_decode_bench [--threads T] [--reps R] [--B B]\n", a.c_str());
      return 2;
    }
  }
  if (threads < 1 || reps < 1 || B < 1) {
    std::fprintf(stderr, "--threads, --reps and --B must be >= 1\n");
    return 2;
  }
  set_num_threads(static_cast<int>(threads));
  nlohmann::json report = {{"benchmark", "attention_decode_bench"}, {"threads", threads}, {"B", B}, {"reps", reps}};
  const int64_t tiled_tq = kernels::cpu::kDecodeQueries + 1;
  for (const Heads& h : {Heads{"gpt2-124M", 12, 12, 64}, Heads{"llama125M", 12, 4, 64}}) {
    nlohmann::json rows = nlohmann::json::array();
    const nlohmann::json tiled = run(h, B, tiled_tq, reps);
    for (int64_t Tq : {int64_t{1}, int64_t{4}, kernels::cpu::kDecodeQueries}) {
      nlohmann::json row = run(h, B, Tq, reps);
      row["tiled_cpu_ratio"] = tiled["cpu_us"].get<double>() / row["cpu_us"].get<double>();
      rows.push_back(row);
    }
    rows.push_back(tiled);
    report["shapes"][h.name] = {{"NH", h.NH}, {"NKV", h.NKV}, {"HS", h.HS}, {"calls", rows}};
  }
  std::printf("%s\n", report.dump(1).c_str());
  return 0;
}
