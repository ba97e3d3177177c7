// Tokenizer throughput on one thread: GPT-2 encoding (with an empty cache, then warm), its
// pre-tokenization alone, decoding, and the byte tokenizer, on real corpora; with --tiktoken,
// the same for the cl100k_base and o200k_base rank files. Prints JSON.
// bench/tokenizer_compare.py runs it beside OpenAI's tiktoken (bench/tiktoken_bench.mjs).
// Encoding is single-threaded by design (one call, one thread), so MB/s here is per core
// (measured in CPU time: see Note [CPU time]).
// The target (issue #3) is at least 5 MB/s for GPT-2 encoding of Tiny Shakespeare.
//
// Usage: tokenizer_bench [--vocab DIR] [--tiktoken DIR] [--file F]... [--reps R]
//   --vocab     GPT-2 files (default: $TRIDENT_GPT2_DIR, else ../shared/data/gpt2 next to the repo)
//   --tiktoken  a directory with cl100k_base.tiktoken / o200k_base.tiktoken
//               (scripts/fetch-tiktoken-ranks.sh); without it those are not measured
//   --file   text files (default: ../shared/data/{shakespeare,war_and_peace}.txt)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/byte_tokenizer.h"
#include "data/gpt2_tokenizer.h"
#include "data/pretokenize.h"
#include "data/tiktoken_ranks.h"

using namespace trident::data;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

namespace {

double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Note [CPU time]: the benchmark times the calling thread's CPU time, not wall time, so that
// other processes sharing the machine do not lower the per-core throughput it reports (on an
// idle machine the two agree). Wall time is reported once, for the cold GPT-2 encode.
template <class Fn>
double seconds(const Fn& fn) {
  const double start = thread_cpu_seconds();
  fn();
  return thread_cpu_seconds() - start;
}

template <class Fn>
double median_seconds(int reps, const Fn& fn) {
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) t.push_back(seconds(fn));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

double mb_per_s(size_t bytes, double s) {
  return static_cast<double>(bytes) / 1e6 / s;
}

}  // namespace

int main(int argc, char** argv) {
  const fs::path shared = fs::path(__FILE__).parent_path().parent_path().parent_path() / "shared";
  fs::path vocab = shared / "data" / "gpt2";
  if (const char* env = std::getenv("TRIDENT_GPT2_DIR"); env && *env) vocab = env;
  std::vector<fs::path> files;
  fs::path tiktoken_dir;
  int reps = 5;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--vocab") && i + 1 < argc)
      vocab = argv[++i];
    else if (!std::strcmp(argv[i], "--tiktoken") && i + 1 < argc)
      tiktoken_dir = argv[++i];
    else if (!std::strcmp(argv[i], "--file") && i + 1 < argc)
      files.emplace_back(argv[++i]);
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = std::max(1, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: %s [--vocab DIR] [--tiktoken DIR] [--file F]... [--reps R]\n", argv[0]);
      return 2;
    }
  }
  if (files.empty())
    for (const char* name : {"shakespeare.txt", "war_and_peace.txt"})
      if (fs::exists(shared / "data" / name)) files.push_back(shared / "data" / name);
  if (files.empty()) {
    std::fprintf(stderr, "tokenizer_bench: no input files (pass --file F)\n");
    return 2;
  }

  nlohmann::json out;
  out["benchmark"] = "tokenizer";
  out["threads"] = 1;
  out["reps"] = reps;
  auto load = [&] {
    auto result = Gpt2Tokenizer::load(vocab);
    if (!result.is_ok()) {
      std::fprintf(stderr, "tokenizer_bench: %s\n", result.status().to_string().c_str());
      std::exit(1);
    }
    return std::move(result).value();
  };
  std::unique_ptr<Gpt2Tokenizer> first;
  out["gpt2_load_cpu_s"] = seconds([&] { first = load(); });
  out["gpt2_vocab"] = first->name();

  for (const fs::path& file : files) {
    const std::string text = read_file(file);
    nlohmann::json r;
    r["file"] = file.filename().string();
    r["bytes"] = text.size();

    // A fresh tokenizer: every repeated word is encoded once before the cache has it.
    const std::unique_ptr<Gpt2Tokenizer> fresh = load();
    std::vector<TokenId> ids;
    const auto wall_start = Clock::now();
    const double cold_s = seconds([&] { ids = fresh->encode(text); });
    const double cold_wall_s = std::chrono::duration<double>(Clock::now() - wall_start).count();
    const double warm_s = median_seconds(reps, [&] { ids = fresh->encode(text); });
    r["tokens"] = ids.size();
    r["bytes_per_token"] = static_cast<double>(text.size()) / static_cast<double>(ids.size());
    r["gpt2_encode_cold_mb_per_s"] = mb_per_s(text.size(), cold_s);
    r["gpt2_encode_cold_wall_mb_per_s"] = mb_per_s(text.size(), cold_wall_s);
    r["gpt2_encode_warm_mb_per_s"] = mb_per_s(text.size(), warm_s);
    r["gpt2_encode_warm_tokens_per_s"] = static_cast<double>(ids.size()) / warm_s;

    Pretokenizer pretokenizer;
    size_t pieces = 0;
    const double split_s = median_seconds(reps, [&] {
      pieces = 0;
      pretokenizer.split(text, [&](std::string_view) { ++pieces; });
    });
    r["pieces"] = pieces;
    r["pretokenize_mb_per_s"] = mb_per_s(text.size(), split_s);

    std::string decoded;
    const double decode_s = median_seconds(reps, [&] { decoded = fresh->decode(ids); });
    r["gpt2_decode_mb_per_s"] = mb_per_s(text.size(), decode_s);
    r["gpt2_round_trip_exact"] = decoded == text;

    // The rank-file encodings: a fresh tokenizer for the cold encode, as for GPT-2.
    for (const char* encoding : {"cl100k_base", "o200k_base"}) {
      if (tiktoken_dir.empty()) break;
      const fs::path rank_file = tiktoken_dir / (std::string(encoding) + ".tiktoken");
      auto loaded = load_tiktoken_ranks(rank_file);
      if (!loaded.is_ok()) {
        std::fprintf(stderr, "tokenizer_bench: %s\n", loaded.status().to_string().c_str());
        std::exit(1);
      }
      const std::unique_ptr<ByteLevelBpeTokenizer> tok = std::move(loaded).value();
      std::vector<TokenId> enc_ids;
      const double enc_cold_s = seconds([&] { enc_ids = tok->encode(text); });
      const double enc_warm_s = median_seconds(reps, [&] { enc_ids = tok->encode(text); });
      const std::string key = encoding;
      r[key + "_tokens"] = enc_ids.size();
      r[key + "_encode_cold_mb_per_s"] = mb_per_s(text.size(), enc_cold_s);
      r[key + "_encode_warm_mb_per_s"] = mb_per_s(text.size(), enc_warm_s);
      Pretokenizer enc_split(tok->pattern());
      const double enc_split_s = median_seconds(reps, [&] {
        enc_split.split(text, [&](std::string_view) {});
      });
      r[key + "_pretokenize_mb_per_s"] = mb_per_s(text.size(), enc_split_s);
    }

    ByteTokenizer bytes;
    std::vector<TokenId> byte_ids;
    const double bytes_s = median_seconds(reps, [&] { byte_ids = bytes.encode(text); });
    r["bytes_encode_mb_per_s"] = mb_per_s(text.size(), bytes_s);
    out["results"].push_back(r);
  }
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
