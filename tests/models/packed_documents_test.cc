// Packed documents (ops/documents.h) through whole models: a row holding several documents,
// with document masks, gives the loss and gradients its documents give run one by one, for
// GPT-2 (learned positions) and LLaMA with grouped-query attention (rotary positions), with
// and without activation checkpointing (the rerun reads the documents again); the loss mask
// (targets -1) is honoured. Then the same comparison with the mask broken on purpose (one
// boundary dropped, or none at all) must fail: the comparison can see a broken mask.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "autograd/engine.h"
#include "core/factory.h"
#include "core/views.h"
#include "models/causal_lm.h"
#include "models/registry.h"
#include "ops/documents.h"
#include "support/tiny_model_configs.h"

namespace trident::models {
namespace {

constexpr int64_t kEndOfText = 39;  // the tiny vocabulary's last id ends a document
// Documents of 20, 1, 64, 40 and 25 tokens in one row of 150: boundaries inside a 64-row
// attention tile, on a tile's edge and across tiles, and a one-token document.
const std::vector<int64_t> kLengths = {20, 1, 64, 40, 25};

struct Rows {
  Tensor inputs, targets;  // (1, T)
};

// One packed row: documents of kLengths, each ending in kEndOfText; targets are the next
// token (across a boundary too, as a token stream gives them), every 7th not trained (-1).
Rows packed_row(uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<int64_t> ids;
  for (int64_t n : kLengths) {
    for (int64_t i = 0; i + 1 < n; ++i) ids.push_back(static_cast<int64_t>(gen() % kEndOfText));
    ids.push_back(kEndOfText);
  }
  const auto T = static_cast<int64_t>(ids.size());
  std::vector<int64_t> targets(ids.begin() + 1, ids.end());
  targets.push_back(static_cast<int64_t>(gen() % kEndOfText));
  for (int64_t t = 3; t < T; t += 7) targets[static_cast<size_t>(t)] = -1;
  return {from_vector(ids, {1, T}), from_vector(targets, {1, T})};
}

struct LossAndGrads {
  double loss = 0;
  std::vector<std::vector<double>> grads;  // per parameter
};

LossAndGrads run(CausalLM& model, const Tensor& inputs, const Tensor& targets, const ops::Documents* docs) {
  model.zero_grad();
  const Tensor loss = model.loss(inputs, targets, docs);
  autograd::backward(loss);
  LossAndGrads out{loss.item(), {}};
  for (auto& [name, p] : model.named_parameters())
    out.grads.push_back(p.grad() ? to_vector<double>(*p.grad()) : std::vector<double>(static_cast<size_t>(p.numel())));
  return out;
}

// The documents one by one: the mean over every trained token, as the packed row's loss is,
// i.e. each document's mean loss and gradient weighed by its trained tokens.
LossAndGrads one_by_one(CausalLM& model, const Rows& rows) {
  LossAndGrads total;
  int64_t trained = 0, begin = 0;
  const std::vector<int64_t> targets = to_vector<int64_t>(rows.targets);
  for (int64_t t : targets) trained += t != -1 ? 1 : 0;
  for (int64_t n : kLengths) {
    int64_t mine = 0;
    for (int64_t t = begin; t < begin + n; ++t) mine += targets[static_cast<size_t>(t)] != -1 ? 1 : 0;
    if (mine > 0) {
      const Tensor x = core::contiguous(views::narrow(rows.inputs, 1, begin, n));
      const Tensor y = core::contiguous(views::narrow(rows.targets, 1, begin, n));
      const LossAndGrads doc = run(model, x, y, nullptr);
      const double w = static_cast<double>(mine) / static_cast<double>(trained);
      total.loss += w * doc.loss;
      total.grads.resize(doc.grads.size());
      for (size_t i = 0; i < doc.grads.size(); ++i) {
        total.grads[i].resize(doc.grads[i].size());
        for (size_t j = 0; j < doc.grads[i].size(); ++j) total.grads[i][j] += w * doc.grads[i][j];
      }
    }
    begin += n;
  }
  return total;
}

// The largest difference relative to the largest magnitude, over the loss and every gradient.
double worst_relative_difference(const LossAndGrads& a, const LossAndGrads& b) {
  double worst = std::abs(a.loss - b.loss) / std::abs(b.loss);
  for (size_t i = 0; i < a.grads.size(); ++i) {
    double diff = 0, size = 0;
    for (size_t j = 0; j < a.grads[i].size(); ++j) {
      diff = std::max(diff, std::abs(a.grads[i][j] - b.grads[i][j]));
      size = std::max(size, std::abs(b.grads[i][j]));
    }
    if (size > 0) worst = std::max(worst, diff / size);
  }
  return worst;
}

ModelConfig with_context(ModelConfig c, const std::string& checkpointing) {
  c.block_size = 160;
  c.activation_checkpointing = checkpointing;
  return c;
}

class PackedDocuments : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {
 protected:
  std::unique_ptr<CausalLM> model() const {
    const auto& [arch, checkpointing] = GetParam();
    return build_model(with_context(arch == "gpt2" ? testing::tiny_gpt2() : testing::tiny_llama(false), checkpointing));
  }
};

TEST_P(PackedDocuments, APackedRowGivesItsDocumentsLossAndGradientsOneByOne) {
  const std::unique_ptr<CausalLM> m = model();
  const Rows rows = packed_row(7);
  const ops::Documents docs =
      ops::documents_from_positions(ops::positions_after(rows.inputs, kEndOfText), Device::cpu());
  const LossAndGrads packed = run(*m, rows.inputs, rows.targets, &docs);
  const LossAndGrads separate = one_by_one(*m, rows);
  EXPECT_LT(worst_relative_difference(packed, separate), 1e-5) << "loss " << packed.loss << " vs " << separate.loss;
}

TEST_P(PackedDocuments, ABrokenMaskFailsTheComparison) {
  const std::unique_ptr<CausalLM> m = model();
  const Rows rows = packed_row(7);
  const LossAndGrads separate = one_by_one(*m, rows);
  // No document mask at all: the row attends across every boundary.
  EXPECT_GT(worst_relative_difference(run(*m, rows.inputs, rows.targets, nullptr), separate), 1e-3);
  // One boundary dropped: the fourth document's positions carry on from the third's.
  std::vector<int64_t> pos = to_vector<int64_t>(ops::positions_after(rows.inputs, kEndOfText));
  const int64_t fourth = kLengths[0] + kLengths[1] + kLengths[2];
  for (int64_t t = fourth; t < fourth + kLengths[3]; ++t) pos[static_cast<size_t>(t)] = pos[static_cast<size_t>(t) - 1] + 1;
  const ops::Documents merged = ops::documents_from_positions(from_vector(pos, rows.inputs.shape()), Device::cpu());
  EXPECT_GT(worst_relative_difference(run(*m, rows.inputs, rows.targets, &merged), separate), 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Families, PackedDocuments,
                         ::testing::Combine(::testing::Values("gpt2", "llama"), ::testing::Values("none", "full")),
                         [](const auto& info) { return std::get<0>(info.param) + "_" + std::get<1>(info.param); });

TEST(Documents, PositionsAfterTheEndOfTextToken) {
  const Tensor ids = from_vector(std::vector<int64_t>{5, 9, 1, 9, 9, 2, 3, 4}, {2, 4});
  EXPECT_EQ(to_vector<int64_t>(ops::positions_after(ids, 9)), (std::vector<int64_t>{0, 1, 0, 1, 0, 0, 1, 2}));
}

TEST(Documents, BoundsFromPositionIds) {
  const ops::Documents d = ops::documents_from_positions(
      from_vector(std::vector<int64_t>{3, 4, 0, 1, 2, 0, 0, 1, 2, 3, 0, 1}, {2, 6}), Device::cpu());
  EXPECT_EQ(to_vector<int64_t>(d.start), (std::vector<int64_t>{0, 0, 2, 2, 2, 5, 0, 0, 0, 0, 4, 4}));
  EXPECT_EQ(to_vector<int64_t>(d.end), (std::vector<int64_t>{2, 2, 5, 5, 5, 6, 4, 4, 4, 4, 6, 6}));
}

TEST(Documents, BadPositionIdsAreNamed) {
  auto error = [](std::vector<int64_t> pos) {
    try {
      ops::documents_from_positions(from_vector(pos, {1, static_cast<int64_t>(pos.size())}), Device::cpu());
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error({0, 1, 3}).find("position id 3 at row 0, index 2 follows 1"), std::string::npos) << error({0, 1, 3});
  EXPECT_NE(error({0, -1}).find("position id -1 at row 0, index 1 is negative"), std::string::npos);
}

}  // namespace
}  // namespace trident::models
