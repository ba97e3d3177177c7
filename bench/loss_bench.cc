// Loss benchmark: the cross-entropy of a GPT-2 head, forward and backward, per logit, as one
// process runs it without tensor parallelism (ops::cross_entropy over (N, V)) and as one
// tensor-parallel rank runs its share (the vocabulary-parallel passes over (N, V / tp):
// maxima, sums, gradient; the all-reduces between them are not timed). Both should cost about
// the same per logit: the vocabulary-parallel loss is the same math split over the ranks.
//
// Usage: loss_bench [--threads N] [--reps R] [--N rows] [--V vocab] [--tp T]
// Times are the fastest rep's process CPU time (what a loaded machine does not distort) and
// wall time; JSON on stdout.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>

#include <nlohmann/json.hpp>

#include "core/cpu_time.h"
#include "core/factory.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "ops/loss.h"
#include "ops/vocab_parallel.h"

using namespace trident;

namespace {

struct Timing {
  double cpu_s = 1e30, wall_s = 1e30;
};

template <class Fn>
Timing fastest(int reps, Fn&& fn) {
  fn();  // warm-up: first-touch pages, allocator pools
  Timing best;
  for (int r = 0; r < reps; ++r) {
    const auto w0 = std::chrono::steady_clock::now();
    const double c0 = process_cpu_seconds();
    fn();
    const double c1 = process_cpu_seconds();
    const double w1 = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
    best.cpu_s = std::min(best.cpu_s, c1 - c0);
    best.wall_s = std::min(best.wall_s, w1);
  }
  return best;
}

int64_t int_flag(int argc, char** argv, int& i, const char* name) {
  if (i + 1 >= argc) {
    std::fprintf(stderr, "loss_bench: %s needs a value\n", name);
    std::exit(2);
  }
  char* end = nullptr;
  const long long v = std::strtoll(argv[++i], &end, 10);
  if (*end != '\0' || v <= 0) {
    std::fprintf(stderr, "loss_bench: %s must be a positive integer, got '%s'\n", name, argv[i]);
    std::exit(2);
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t threads = 1, reps = 5, N = 1024, V = 50257, tp = 2;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads") threads = int_flag(argc, argv, i, "--threads");
    else if (a == "--reps") reps = int_flag(argc, argv, i, "--reps");
    else if (a == "--N") N = int_flag(argc, argv, i, "--N");
    else if (a == "--V") V = int_flag(argc, argv, i, "--V");
    else if (a == "--tp") tp = int_flag(argc, argv, i, "--tp");
    else {
      std::fprintf(stderr, "loss_bench: unknown argument '%s' (allowed: --threads --reps --N --V --tp)\n", argv[i]);
      return 2;
    }
  }
  set_num_threads(static_cast<int>(threads));
  Generator gen(5);
  const Tensor logits = randn({N, V}, gen, DType::kF32);
  Tensor targets = empty({N}, DType::kI64);
  for (int64_t i = 0; i < N; ++i) targets.data_ptr<int64_t>()[i] = (i * 7919) % V;
  const Tensor dloss = ones({}, DType::kF32);

  const Timing local = fastest(static_cast<int>(reps), [&] {
    const ops::CrossEntropyOutput out = ops::cross_entropy(logits, targets, -1, Reduction::kMean);
    (void)ops::cross_entropy_backward(dloss, logits, targets, out.logsumexp, -1, Reduction::kMean);
  });

  // Rank 0's shard: the first ceil(V / tp) columns, targets in the whole vocabulary's ids.
  const int64_t shard = (V + tp - 1) / tp;
  const Tensor part = randn({N, shard}, gen, DType::kF32);
  const Timing vocab_parallel = fastest(static_cast<int>(reps), [&] {
    const Tensor row_max = ops::vocab_parallel_row_max(part);
    const Tensor sums = ops::vocab_parallel_sums(part, row_max, targets, 0);
    (void)ops::vocab_parallel_backward(part, row_max, sums, targets, 0, -1, 1.0 / static_cast<double>(N));
  });

  auto entry = [](const Timing& t, double logits_n) {
    return nlohmann::json{{"cpu_s", t.cpu_s}, {"wall_s", t.wall_s}, {"cpu_ns_per_logit", t.cpu_s / logits_n * 1e9}};
  };
  const nlohmann::json j = {
      {"bench", "loss_bench"},
      {"N", N},
      {"V", V},
      {"tp", tp},
      {"threads", threads},
      {"reps", reps},
      {"cross_entropy_forward_backward", entry(local, static_cast<double>(N * V))},
      {"vocab_parallel_forward_backward_one_rank", entry(vocab_parallel, static_cast<double>(N * shard))},
  };
  std::printf("%s\n", j.dump(1).c_str());
  return 0;
}
