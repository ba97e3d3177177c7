// Op-suite cases: packed documents (ops/documents.h). Attention with document masks: boundaries
// inside a 64-row tile, on a tile's edge and across three tiles, one-token documents, a row
// that begins inside a document (position ids from 5), rows packed differently in one batch,
// with grouped-query attention, with a sliding window, and with a tokens-first output. RoPE at
// position ids that restart. The reference masks by the position ids themselves (a key is
// hidden when a document starts after it, at or before the query), not by the bounds the
// kernels read, so the two descriptions are checked against each other.
#include "autograd/functions.h"
#include "core/factory.h"
#include "kernels/reference/attention.h"
#include "kernels/reference/rope.h"
#include "op_case.h"
#include "ops/documents.h"

namespace trident::testing {
namespace {

// Position ids of B rows of T tokens: row b holds documents of lengths rows[b] in order (the
// last one cut at T), its first document starting at position first[b].
std::vector<int64_t> packed_positions(int64_t T, const std::vector<std::vector<int64_t>>& rows,
                                      const std::vector<int64_t>& first = {}) {
  std::vector<int64_t> pos;
  for (size_t b = 0; b < rows.size(); ++b) {
    int64_t p = first.empty() ? 0 : first[b];
    size_t doc = 0;
    int64_t left = rows[b].empty() ? T : rows[b][0];
    for (int64_t t = 0; t < T; ++t) {
      if (left == 0) {
        ++doc;
        left = doc < rows[b].size() ? rows[b][doc] : T;
        p = 0;
      }
      pos.push_back(p++);
      --left;
    }
  }
  return pos;
}

void document_case(const std::string& name, int64_t B, int64_t NH, int64_t NKV, int64_t T, int64_t HS,
                   const std::vector<int64_t>& positions, int64_t window = 0, bool tokens_first = false) {
  const Tensor pos = from_vector(positions, {B, T});
  add_case(OpCase("attention", "documents: " + name)
               .input(normal({B, NH, T, HS}))
               .input(normal({B, NKV, T, HS}))
               .input(normal({B, NKV, T, HS}))
               .forward([=](const TensorList& x) {
                 const ops::Documents docs = ops::documents_from_positions(pos, x[0].device());
                 const auto layout = tokens_first ? AttentionOutputLayout::kTokensFirst : AttentionOutputLayout::kHeadsFirst;
                 return TensorList{trident::attention(x[0], x[1], x[2], true, std::nullopt, layout, window, &docs)};
               })
               .reference([=](const Arrays& x) {
                 return Arrays{reference::attention(x[0], x[1], x[2], true, std::nullopt, window, positions)};
               })
               .reduction_length(NH / NKV * (window > 0 ? std::min(window, T) : T) + HS)
               .dtypes({DType::kF32, DType::kBF16, DType::kF16}));
}

}  // namespace

TRI_OP_CASES(document_cases) {
  document_case("3 documents in one tile", 2, 2, 2, 37, 16, packed_positions(37, {{10, 20, 7}, {5, 32}}));
  document_case("boundaries on and around tile edges, 3 tiles", 1, 2, 2, 150, 8,
                packed_positions(150, {{64, 1, 63, 22}}));
  document_case("one-token documents", 1, 2, 2, 70, 8, packed_positions(70, {{1, 1, 30, 1, 1, 36}}));
  document_case("a row continuing a document", 2, 2, 1, 67, 16, packed_positions(67, {{40, 27}, {67}}, {5, 0}));
  document_case("GQA NH=4 NKV=2, a document across 3 tiles", 1, 4, 2, 140, 8,
                packed_positions(140, {{3, 130, 7}}));
  document_case("with a sliding window of 20", 1, 2, 2, 130, 8, packed_positions(130, {{50, 10, 70}}), 20);
  document_case("tokens-first output", 2, 3, 3, 67, 8, packed_positions(67, {{30, 37}, {66, 1}}), 0, true);

  // RoPE at restarting positions (and one row continuing a document from position 12).
  const std::vector<int64_t> positions = packed_positions(9, {{4, 5}, {9}}, {0, 12});
  const Tensor pos = from_vector(positions, {2, 9});
  add_case(OpCase("rope", "documents: restarting positions")
               .input(normal({2, 9, 3, 8}))
               .forward([=](const TensorList& x) {
                 return TensorList{trident::rope(x[0], RopeParams(10000.0), core::to_device(pos, x[0].device()))};
               })
               .reference([=](const Arrays& a) {
                 return Arrays{reference::rope(a[0], 10000.0, 0, 0.0, 1.0, 4.0, 8192.0, positions)};
               })
               .reduction_length(2)
               .dtypes({DType::kF32, DType::kBF16, DType::kF16}));
}

}  // namespace trident::testing
