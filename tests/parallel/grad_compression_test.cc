// Compressed gradient synchronization (parallel.grad_compression) under mpirun with 1, 2 and
// 4 ranks (label mpi): PowerSGD's result and error feedback against a dense double-precision
// computation of the same algorithm over every rank's input; 1-bit Adam's compressed
// all-reduce against a plain simulation of every worker and server, and its error feedback
// keeping the sum of what was sent; bf16's all-reduce within bf16's rounding at half the
// bytes; the tiny run's bytes per step from the communication counters against each
// compressor's formula; a resume mid-run giving the uninterrupted losses bit for bit; and the
// layouts compression refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint_dir.h"
#include "core/copy.h"
#include "core/factory.h"
#include "models/registry.h"
#include "parallel/grad_reducer.h"
#include "parallel/onebit_adam.h"
#include "parallel/parallelize.h"
#include "parallel/powersgd.h"
#include "support/mpi_training_test.h"
#include "support/tiny_run.h"
#include "train/trainer.h"

namespace trident::parallel {
namespace {

using Matrix = std::vector<std::vector<double>>;  // rows of columns

class GradCompressionTest : public testing::MpiTrainingTest {};

// Rank j's input at step t, element i: the same on every rank that computes it.
float input(int j, int t, int64_t i) {
  return static_cast<float>(std::sin(0.37 * static_cast<double>(i) + 1.3 * j + 0.71 * t) *
                            (1.0 + 0.5 * std::cos(0.11 * static_cast<double>(i) * (j + 1))));
}

Tensor inputs_of(int j, int t, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = input(j, t, i);
  return from_vector(v, {n});
}

void gram_schmidt(Matrix& a) {  // columns, in double
  const size_t rows = a.size(), cols = a.empty() ? 0 : a[0].size();
  for (size_t i = 0; i < cols; ++i) {
    double sq = 0.0;
    for (size_t k = 0; k < rows; ++k) sq += a[k][i] * a[k][i];
    const double norm = std::sqrt(sq);
    for (size_t k = 0; k < rows; ++k) a[k][i] = norm > 0 ? a[k][i] / norm : 0.0;
    for (size_t j = i + 1; j < cols; ++j) {
      double dot = 0.0;
      for (size_t k = 0; k < rows; ++k) dot += a[k][i] * a[k][j];
      for (size_t k = 0; k < rows; ++k) a[k][j] -= dot * a[k][i];
    }
  }
}

// PowerSGD as powerSGD_hook computes it, densely, for every rank at once: the result (the
// same on every rank) and each rank's new error, from each rank's input plus its error.
struct DenseMatrix {
  int64_t offset, rows, cols, r;
  Matrix q;
};
std::vector<double> dense_powersgd(std::vector<std::vector<double>>& errors, const std::vector<std::vector<double>>& x,
                                   std::vector<DenseMatrix>& matrices, const std::vector<std::pair<int64_t, int64_t>>& plain) {
  const size_t N = x.size(), n = x[0].size();
  std::vector<std::vector<double>> m(N);
  for (size_t j = 0; j < N; ++j) {
    m[j] = x[j];
    for (size_t i = 0; i < n; ++i) m[j][i] += errors[j][i];
  }
  std::vector<double> out(n, 0.0);
  for (const auto& [offset, len] : plain)
    for (int64_t i = offset; i < offset + len; ++i) {
      for (size_t j = 0; j < N; ++j) out[static_cast<size_t>(i)] += m[j][static_cast<size_t>(i)];
      out[static_cast<size_t>(i)] /= static_cast<double>(N);
    }
  for (DenseMatrix& d : matrices) {
    auto at = [&](size_t j, int64_t row, int64_t col) { return m[j][static_cast<size_t>(d.offset + row * d.cols + col)]; };
    gram_schmidt(d.q);
    Matrix p(static_cast<size_t>(d.rows), std::vector<double>(static_cast<size_t>(d.r), 0.0));
    for (size_t j = 0; j < N; ++j)
      for (int64_t a = 0; a < d.rows; ++a)
        for (int64_t c = 0; c < d.r; ++c)
          for (int64_t b = 0; b < d.cols; ++b) p[a][c] += at(j, a, b) * d.q[b][c];
    gram_schmidt(p);
    for (auto& row : d.q) std::fill(row.begin(), row.end(), 0.0);
    for (size_t j = 0; j < N; ++j)
      for (int64_t b = 0; b < d.cols; ++b)
        for (int64_t c = 0; c < d.r; ++c)
          for (int64_t a = 0; a < d.rows; ++a) d.q[b][c] += at(j, a, b) * p[a][c] / static_cast<double>(N);
    for (int64_t a = 0; a < d.rows; ++a)
      for (int64_t b = 0; b < d.cols; ++b) {
        double v = 0.0;
        for (int64_t c = 0; c < d.r; ++c) v += p[a][c] * d.q[b][c];
        out[static_cast<size_t>(d.offset + a * d.cols + b)] = v;
      }
  }
  for (size_t j = 0; j < N; ++j)
    for (size_t i = 0; i < n; ++i) errors[j][i] = m[j][i] - out[i];
  return out;
}

TEST_F(GradCompressionTest, PowerSgdMatchesADenseComputationOfEveryRank) {
  const int N = world->size(), me = world->rank();
  // A matrix, a bias, a matrix too small to compress at rank 2, a 3-D tensor viewed as 20 x 10.
  BucketLayout layout{{Shape{37, 23}, Shape{13}, Shape{3, 4}, Shape{20, 2, 5}}, {0, 851, 864, 876}, 1076};
  const int64_t n = layout.numel, start = 1, steps = 4;
  PowerSgdReducer reducer(*world, /*rank=*/2, start);
  reducer.prepare({layout});
  // P: 37 x 2 + 20 x 2, Q: 23 x 2 + 10 x 2, uncompressed: 13 + 12.
  EXPECT_EQ(reducer.formula_bytes(0), 4 * (74 + 40 + 46 + 20 + 25));
  std::vector<DenseMatrix> dense = {{0, 37, 23, 2, {}}, {876, 20, 10, 2, {}}};
  for (size_t k = 0; k < dense.size(); ++k) {
    const Tensor q = PowerSgdReducer::initial_q(0, k, dense[k].cols, dense[k].r);
    const float* v = q.data_ptr<float>();
    dense[k].q.assign(static_cast<size_t>(dense[k].cols), std::vector<double>(static_cast<size_t>(dense[k].r)));
    for (int64_t b = 0; b < dense[k].cols; ++b)
      for (int64_t c = 0; c < dense[k].r; ++c) dense[k].q[b][c] = v[b * dense[k].r + c];
  }
  std::vector<std::vector<double>> errors(static_cast<size_t>(N), std::vector<double>(static_cast<size_t>(n), 0.0));
  for (int t = 0; t < steps; ++t) {
    std::vector<std::vector<double>> x(static_cast<size_t>(N));
    for (int j = 0; j < N; ++j)
      for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(j)].push_back(input(j, t, i));
    const Tensor buffer = inputs_of(me, t, n);
    reducer.set_step(t);
    const int64_t before = world->stats().total_bytes();
    reducer.start(0, buffer)->wait();
    const int64_t bytes = world->stats().total_bytes() - before;
    std::vector<double> expect(static_cast<size_t>(n), 0.0);
    if (t < start) {  // the plain mean
      for (int j = 0; j < N; ++j)
        for (int64_t i = 0; i < n; ++i) expect[static_cast<size_t>(i)] += x[static_cast<size_t>(j)][static_cast<size_t>(i)] / N;
      EXPECT_EQ(bytes, 4 * n) << "step " << t;
    } else {
      expect = dense_powersgd(errors, x, dense, {{851, 13}, {864, 12}});
      EXPECT_EQ(bytes, reducer.formula_bytes(0)) << "step " << t;
    }
    double scale = 0.0;
    for (double v : expect) scale = std::max(scale, std::abs(v));
    const float* got = buffer.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i)
      ASSERT_NEAR(got[i], expect[static_cast<size_t>(i)], 2e-4 * scale) << "step " << t << ", element " << i;
    const Tensor error = reducer.state().at(0).second;
    const float* e = error.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i)
      ASSERT_NEAR(e[i], errors[static_cast<size_t>(me)][static_cast<size_t>(i)], 2e-4 * scale)
          << "error feedback, step " << t << ", element " << i;
  }
}

// DeepSpeed's compressed_allreduce, written out for every worker and server at once; with
// `block` > 0, one scale per block of that many elements instead of one per buffer and chunk.
struct OnebitSimulation {
  int N;
  int64_t n, block;
  std::vector<std::vector<float>> worker_error, server_error;
  OnebitSimulation(int ranks, int64_t numel, int64_t block_elements)
      : N(ranks), n(numel), block(block_elements), worker_error(ranks, std::vector<float>(numel, 0.0f)),
        server_error(ranks, std::vector<float>(numel / ranks, 0.0f)) {}
  static float sgn(float v) { return v < 0.0f ? -1.0f : 1.0f; }
  // Each element's scale: the RMS of its block of `b` elements.
  static std::vector<float> scales_of(const std::vector<float>& v, int64_t b) {
    std::vector<float> out(v.size());
    for (size_t b0 = 0; b0 < v.size(); b0 += static_cast<size_t>(b)) {
      double sq = 0.0;
      for (size_t i = b0; i < b0 + static_cast<size_t>(b); ++i) sq += static_cast<double>(v[i]) * v[i];
      const float s = static_cast<float>(std::sqrt(sq) / std::sqrt(static_cast<double>(b)));
      for (size_t i = b0; i < b0 + static_cast<size_t>(b); ++i) out[i] = s;
    }
    return out;
  }
  std::vector<float> run(const std::vector<std::vector<float>>& x) {
    const int64_t chunk = n / N;
    std::vector<std::vector<float>> sent(N), scales(N);  // each worker's scaled signs
    for (int j = 0; j < N; ++j) {
      std::vector<float> c(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) c[i] = x[j][i] + worker_error[j][i];
      scales[j] = scales_of(c, block > 0 ? block : n);
      sent[j].resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        sent[j][i] = sgn(c[i]) * scales[j][i];
        worker_error[j][i] = c[i] - sent[j][i];
      }
    }
    std::vector<float> out(static_cast<size_t>(n));
    for (int r = 0; r < N; ++r) {
      std::vector<float> mean(static_cast<size_t>(chunk), 0.0f);
      for (int j = 0; j < N; ++j)
        for (int64_t i = 0; i < chunk; ++i)
          mean[i] += sgn(sent[j][r * chunk + i]) * (scales[j][r * chunk + i] * (1.0f / static_cast<float>(N)));
      for (int64_t i = 0; i < chunk; ++i) mean[i] += server_error[r][i];
      const std::vector<float> s = scales_of(mean, block > 0 ? block : chunk);
      for (int64_t i = 0; i < chunk; ++i) {
        out[r * chunk + i] = sgn(mean[i]) * s[i];
        server_error[r][i] = mean[i] - out[r * chunk + i];
      }
    }
    return out;
  }
};

TEST_F(GradCompressionTest, OnebitAllreduceMatchesASimulationOfEveryWorkerAndServer) {
  const int N = world->size(), me = world->rank();
  for (const int64_t block : {int64_t{0}, int64_t{64}}) {
    SCOPED_TRACE("onebit_block " + std::to_string(block));
    const int64_t n = onebit_padding(N, block) * 3;
    Tensor we = zeros({n}), se = zeros({n / N});
    OnebitSimulation sim(N, n, block);
    for (int t = 0; t < 4; ++t) {
      std::vector<std::vector<float>> x(N);
      for (int j = 0; j < N; ++j)
        for (int64_t i = 0; i < n; ++i) x[j].push_back(input(j, t, i));
      const std::vector<float> expect = sim.run(x);
      const Tensor mine = inputs_of(me, t, n);
      const int64_t before = world->stats().total_bytes();
      onebit_allreduce(*world, mine, we, se, block);
      // Two exchanges of n / 32 sign words plus the scales: one per rank, or one per block.
      const int64_t scales = block > 0 ? n / block : N;
      EXPECT_EQ(world->stats().total_bytes() - before, 2 * (n / 8 + 4 * scales));
      const float* got = mine.data_ptr<float>();
      for (int64_t i = 0; i < n; ++i) ASSERT_FLOAT_EQ(got[i], expect[i]) << "step " << t << ", element " << i;
      for (int64_t i = 0; i < n; ++i)
        ASSERT_FLOAT_EQ(we.data_ptr<float>()[i], sim.worker_error[me][i]) << "worker error " << i;
      for (int64_t i = 0; i < n / N; ++i)
        ASSERT_FLOAT_EQ(se.data_ptr<float>()[i], sim.server_error[me][i]) << "server error " << i;
    }
  }
}

// Error feedback loses nothing for good: after T steps the sum of the results equals the sum
// of the ranks' means less the errors still held (the workers' mean and the servers').
TEST_F(GradCompressionTest, OnebitErrorFeedbackKeepsTheSumOfWhatWasSent) {
  const int N = world->size(), me = world->rank();
  const int64_t n = onebit_padding(N, 0) * 4, chunk = n / N;
  Tensor we = zeros({n}), se = zeros({chunk});
  std::vector<double> sent(static_cast<size_t>(n), 0.0), meant(static_cast<size_t>(n), 0.0);
  for (int t = 0; t < 6; ++t) {
    const Tensor x = inputs_of(me, t, n);
    for (int j = 0; j < N; ++j)
      for (int64_t i = 0; i < n; ++i) meant[i] += static_cast<double>(input(j, t, i)) / N;
    onebit_allreduce(*world, x, we, se, 0);
    for (int64_t i = 0; i < n; ++i) sent[i] += x.data_ptr<float>()[i];
  }
  Tensor worker_mean = core::clone(we);
  world->all_reduce(worker_mean);
  Tensor servers = zeros({n});
  world->all_gather(se, servers);
  double worst = 0.0, largest = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double held = worker_mean.data_ptr<float>()[i] / N + servers.data_ptr<float>()[i];
    worst = std::max(worst, std::abs(sent[i] - (meant[i] - held)));
    largest = std::max(largest, std::abs(meant[i]));
  }
  EXPECT_LT(worst, 1e-5 * largest * 6) << "sum of results vs sum of means less the errors held";
  (void)chunk;
}

// An element whose variance froze near zero (an embedding row no batch of the warm-up held)
// and that then gets a gradient: unbounded, 1-bit Adam steps it by lr x m / sqrt(v), orders of
// magnitude past lr; with parallel.onebit_bound_update no element moves more than lr, and
// elements with a settled variance step as without the bound.
TEST_F(GradCompressionTest, OnebitBoundedUpdateStepsNoElementPastTheLearningRate) {
  const int N = world->size();
  const int64_t n = 2 * onebit_padding(N, 64);
  const double lr = 1e-3;
  auto run = [&](bool bound) {
    Tensor p = zeros({n});
    p.set_requires_grad(true);
    optim::AdamWOptions o;
    o.weight_decay = 0.0;
    optim::AdamW adam({{"p", p}}, o);
    OnebitAdam onebit({{"p", p}}, adam, *world, 1, 64, bound);
    // Warm-up: the first half has had almost no gradient, the second half a settled one.
    std::vector<float> g(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) g[static_cast<size_t>(i)] = i < n / 2 ? 1e-9f : (i % 2 ? 1.0f : -1.0f);
    p.mutable_grad() = from_vector(g, {n});
    adam.step(lr);
    onebit.count_warmup_step();
    const std::vector<float> before(p.data_ptr<float>(), p.data_ptr<float>() + n);
    // Compressed: every element gets a gradient of the settled size.
    for (int64_t i = 0; i < n; ++i) g[static_cast<size_t>(i)] = i % 2 ? 1.0f : -1.0f;
    p.mutable_grad() = from_vector(g, {n});
    onebit.step(lr);
    double fresh = 0.0, settled = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const double moved = std::abs(p.data_ptr<float>()[i] - before[static_cast<size_t>(i)]);
      (i < n / 2 ? fresh : settled) = std::max(i < n / 2 ? fresh : settled, moved);
    }
    return std::make_pair(fresh, settled);
  };
  const auto [fresh_unbounded, settled_unbounded] = run(false);
  const auto [fresh_bounded, settled_bounded] = run(true);
  EXPECT_GT(fresh_unbounded, 100 * lr) << "the frozen near-zero variance should blow the step up without the bound";
  EXPECT_LE(fresh_bounded, lr * (1 + 1e-5));
  EXPECT_GT(fresh_bounded, 0.5 * lr);
  EXPECT_NEAR(settled_bounded, settled_unbounded, 1e-6 * lr) << "a settled element steps as without the bound";
}

TEST_F(GradCompressionTest, Bf16AllReduceIsTheMeanWithinBf16AtHalfTheBytes) {
  const int N = world->size(), me = world->rank();
  const int64_t n = 1000;
  const Tensor buffer = inputs_of(me, 0, n);
  auto reducer = bf16_reducer(*world);
  const int64_t before = world->stats().total_bytes();
  reducer->start(0, buffer)->wait();
  EXPECT_EQ(world->stats().total_bytes() - before, 2 * n);
  int inexact = 0;
  for (int64_t i = 0; i < n; ++i) {
    double mean = 0.0, largest = 0.0;
    for (int j = 0; j < N; ++j) {
      mean += input(j, 0, i) / static_cast<double>(N);
      largest = std::max(largest, std::abs(static_cast<double>(input(j, 0, i))));
    }
    // Each of the N - 1 additions and the cast round to 8 bits of mantissa.
    ASSERT_NEAR(buffer.data_ptr<float>()[i], mean, N * largest * std::ldexp(1.0, -8)) << "element " << i;
    inexact += buffer.data_ptr<float>()[i] != static_cast<float>(mean);
  }
  EXPECT_GT(inexact, 0) << "no element rounded: the sum did not go through bf16";
}

// The tiny run's bytes per step, from the counters in its metrics, against each compressor's
// formula; the step's loss all-reduce adds 16 bytes with several ranks. Under ZeRO-1 the
// compressor replaces the reduce-scatter of the (one, padded) bucket; the rest is as without.
TEST_F(GradCompressionTest, BytesPerStepMatchTheFormulas) {
  const int N = world->size();
  // The loss's all-reduce: its f64 mean and whether any rank has auxiliary values (Note
  // [Auxiliary values over ranks] in train/trainer.cc).
  const int64_t loss = N > 1 ? 16 : 0, steps = 5, start = 2;
  std::vector<int64_t> zero1_none, zero1_none_sent;
  for (const int64_t stage : {0, 1})
    for (const std::string kind : {"none", "bf16", "powersgd", "onebit_adam", "onebit_adam_deepspeed"}) {
      // 1-bit Adam by default (a scale per 256 elements), and as DeepSpeed (one per chunk).
      const bool is_onebit = kind.rfind("onebit_adam", 0) == 0, deepspeed = kind == "onebit_adam_deepspeed";
      if (stage == 1 && is_onebit) continue;
      train::TrainConfig cfg = testing::tiny_run_config(dir);
      cfg.train.out_dir = (dir / ("bytes_" + kind + std::to_string(stage))).string();
      cfg.train.steps = steps;
      cfg.train.eval_interval = 1000;
      cfg.parallel.zero_stage = stage;
      cfg.parallel.grad_compression = is_onebit ? "onebit_adam" : kind;
      cfg.parallel.powersgd_rank = 4;
      cfg.parallel.powersgd_start_step = start;
      cfg.parallel.onebit_warmup_steps = start;
      if (deepspeed) cfg.parallel.onebit_block = 0;
      const int64_t block = cfg.parallel.onebit_block, pad = onebit_padding(N, block);
      int64_t P = 0, powersgd = 0, onebit = 0, tensors = 0;
      for (const auto& [name, p] : models::build_model(cfg.model)->named_parameters()) {
        P += p.numel();
        ++tensors;
        const int64_t padded = (p.numel() + pad - 1) / pad * pad;  // each tensor on its own
        onebit += 2 * (padded / 8 + 4 * (block > 0 ? padded / block : N));
        const int64_t rows = p.size(0), cols = p.numel() / rows, r = std::min({rows, cols, int64_t{4}});
        powersgd += (rows + cols) * r * 2 < rows * cols ? 4 * (rows + cols) * r : 4 * p.numel();
      }
      auto t = train::Trainer::create(cfg, world);
      ASSERT_TRUE(t.is_ok()) << t.status().to_string();
      std::vector<int64_t> bytes, sent;
      t.value()->show_progress = false;
      t.value()->on_step = [&](const train::StepMetrics& m) {
        bytes.push_back(m.comm_bytes.value_or(-1));
        sent.push_back(m.comm_sent_bytes.value_or(-1));
      };
      ASSERT_TRUE(t.value()->run().is_ok());
      ASSERT_EQ(bytes.size(), static_cast<size_t>(steps));
      if (stage == 1 && kind == "none") {
        zero1_none = bytes;
        zero1_none_sent = sent;
      }
      const int64_t bucket = (P + N - 1) / N * N;  // ZeRO's one bucket, padded to the ranks
      for (int64_t s = 0; s < steps; ++s) {
        int64_t expect = 4 * P + loss;
        if (kind == "bf16") expect = 2 * P + loss;
        if (kind == "powersgd" && s >= start) expect = powersgd + loss;
        if (is_onebit && s >= start) {
          expect = onebit + loss;
          // 1/16 of fp32's, but for each tensor's padding to 32 N elements and its 2 N scales.
          if (deepspeed) {
            EXPECT_LE(bytes[s] - loss, (4 * P + 4 * pad * tensors) / 16 + 8 * N * tensors) << kind;
          }
        }
        if (stage == 1) {
          expect = zero1_none[s];
          if (kind == "bf16") expect += 2 * bucket - 4 * bucket;
          if (kind == "powersgd" && s >= start) expect += powersgd - 4 * bucket;
        }
        EXPECT_EQ(bytes[s], expect) << kind << ", ZeRO-" << stage << ", step " << s + 1 << " of " << N
                                    << " ranks, P = " << P;
        if (N == 1) continue;
        if (stage == 1) {  // bf16 reduce-scatters the bucket: half of fp32's bytes sent for it
          if (kind == "bf16") {
            EXPECT_EQ(sent[s], zero1_none_sent[s] - 2 * bucket * (N - 1) / N) << "step " << s + 1;
          }
          continue;
        }
        // What the rank sent (Note [Link classes]): a ring all-reduce sends 2 (N - 1) / N of
        // its tensor; 1-bit Adam's all-to-all and all-gather (N - 1) / N of theirs, so its
        // traffic is 1/32 of fp32's, but for padding and scales.
        const int64_t loss_sent = 2 * loss * (N - 1) / N;
        if (kind == "none") {
          EXPECT_EQ(sent[s], 2 * 4 * P * (N - 1) / N + loss_sent) << "step " << s + 1;
        }
        if (is_onebit && s >= start) {
          EXPECT_NEAR(static_cast<double>(sent[s] - loss_sent), static_cast<double>(onebit * (N - 1) / N),
                      static_cast<double>(2 * tensors)) << kind << ", step " << s + 1;
          if (deepspeed) {
            EXPECT_LE(sent[s] - loss_sent, (8 * P + 8 * pad * tensors) * (N - 1) / N / 32 + 8 * N * tensors);
          }
        }
      }
      if (world->rank() == 0)
        std::printf("zero_stage %lld, %s: %lld bytes per step (sent %lld) after step %lld (P = %lld)\n",
                    static_cast<long long>(stage), kind.c_str(), static_cast<long long>(bytes.back()),
                    static_cast<long long>(sent.back()),
                    static_cast<long long>(start), static_cast<long long>(P));
    }
}

// A checkpoint after compression began (error feedback, PowerSGD's Q, 1-bit Adam's frozen
// variance and errors in it) resumes to the uninterrupted run's losses bit for bit, with data
// parallelism and with ZeRO-1.
TEST_F(GradCompressionTest, ResumeMidRunGivesTheUninterruptedLosses) {
  for (const int64_t stage : {0, 1})
    for (const std::string kind : {"bf16", "powersgd", "onebit_adam", "onebit_adam_blocks"}) {
      const bool onebit = kind.rfind("onebit_adam", 0) == 0;
      if (stage == 1 && onebit) continue;
      const std::string what = kind + ", ZeRO-" + std::to_string(stage);
      train::TrainConfig cfg = testing::tiny_run_config(dir);
      cfg.data.sampler = "sequential";
      cfg.train.steps = 10;
      cfg.train.eval_interval = 1000;
      cfg.train.checkpoint_interval = 1000;
      cfg.parallel.zero_stage = stage;
      cfg.parallel.grad_compression = onebit ? "onebit_adam" : kind;
      // DeepSpeed's form (one scale per chunk, no bound), and block scales with the bound.
      cfg.parallel.onebit_block = kind == "onebit_adam_blocks" ? 64 : 0;
      cfg.parallel.onebit_bound_update = kind == "onebit_adam_blocks";
      cfg.parallel.powersgd_start_step = 3;
      cfg.parallel.onebit_warmup_steps = 3;
      cfg.train.out_dir = (dir / ("straight_" + kind + std::to_string(stage))).string();
      const Run straight = train(cfg, world);
      cfg.train.out_dir = (dir / ("resumed_" + kind + std::to_string(stage))).string();
      cfg.train.checkpoint_interval = 6;
      const Run a = train(cfg, world, 6);
      const Run b = train(cfg, world);
      std::vector<double> joined = a.losses;
      joined.insert(joined.end(), b.losses.begin(), b.losses.end());
      ASSERT_EQ(straight.losses.size(), 10u) << what;
      EXPECT_EQ(joined, straight.losses) << what << " on " << world->size() << " ranks";
      if (world->rank() == 0 && kind != "bf16") {  // every rank's error feedback, apart from the weights
        auto r = checkpoint::CheckpointReader::open(checkpoint::default_env(),
                                                    (dir / ("resumed_" + kind + std::to_string(stage)) / "step_000006").string());
        ASSERT_TRUE(r.is_ok()) << r.status().to_string();
        const std::string error = kind == "powersgd" ? ".powersgd.bucket0.error" : ".onebit.wte.weight.worker_error";
        for (int rank = 0; rank < world->size(); ++rank)
          EXPECT_TRUE(r.value().has_tensor("rank" + std::to_string(rank) + error)) << what << ", rank " << rank;
        int rank_state = 0;
        for (const auto& [name, t] : r.value().manifest().tensors) rank_state += train::Trainer::is_rank_state(name);
        const int64_t per_rank = kind == "powersgd" ? 2 : 2 * static_cast<int64_t>(
                                                                  models::build_model(cfg.model)->named_parameters().size());
        EXPECT_EQ(rank_state, per_rank * world->size()) << what << ": error and Q (or each tensor's worker and server error)";
        EXPECT_FALSE(train::Trainer::is_rank_state("h.0.attn.c_attn.weight"));
      }
    }
}

// bf16 compression runs where the gradients are (the emulated device: collectives staged
// through host memory, results copied back when a reduction completes) with the host's
// losses bit for bit; PowerSGD and 1-bit Adam run on host tensors and say so.
TEST_F(GradCompressionTest, OnADeviceBf16GivesTheHostLossesAndTheOthersAreRefused) {
  train::TrainConfig cfg = testing::tiny_run_config(dir);
  cfg.train.steps = 4;
  cfg.train.eval_interval = 2;
  cfg.train.out_dir = (dir / "device_bf16").string();
  cfg.parallel.grad_compression = "bf16";
  cfg.parallel.bucket_mb = 0.01;  // several buckets: the hooks find earlier ones complete
  expect_device_run_equals_host(cfg, "grad_compression = bf16");
  for (const std::string kind : {"powersgd", "onebit_adam"}) {
    cfg.parallel.grad_compression = kind;
    cfg.train.out_dir = (dir / ("device_" + kind)).string();
    try {
      auto t = train::Trainer::create(cfg, world, testing::emulated_device());
      ADD_FAILURE() << kind << " on a device was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("parallel.grad_compression = " + kind + " runs on host tensors"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST_F(GradCompressionTest, LayoutsCompressionDoesNotComposeWithAreRefusedByName) {
  ParallelOptions o;
  o.grad_compression = "powersgd";
  o.zero_stage = 2;
  try {
    check_layout(o, 4);
    FAIL() << "ZeRO-2 with PowerSGD was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("parallel.grad_compression = powersgd with parallel.zero_stage = 2"),
              std::string::npos)
        << e.what();
  }
  o.zero_stage = 1;
  EXPECT_NO_THROW(check_layout(o, 4));
  o.grad_compression = "onebit_adam";
  EXPECT_THROW(check_layout(o, 4), Error) << "1-bit Adam steps the whole replicated momentum: not under ZeRO";
  o.zero_stage = 0;
  o.tp = 2;
  EXPECT_THROW(check_layout(o, 4), Error);
  o.tp = 1;
  EXPECT_NO_THROW(check_layout(o, 4));
  o.onebit_block = 100;  // not a multiple of 32
  try {
    check_layout(o, 4);
    FAIL() << "parallel.onebit_block = 100 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("parallel.onebit_block must be 0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("got 100"), std::string::npos) << e.what();
  }
  o.onebit_block = 256;
  EXPECT_NO_THROW(check_layout(o, 4));
}

}  // namespace
}  // namespace trident::parallel
