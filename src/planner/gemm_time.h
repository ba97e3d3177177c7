// The time of a block's matrix products by their shapes: each product's forward, dx and dW
// GEMMs at the GEMM rate of the micro-batch's rows and, for the forward and dx, of their
// reduction length K on one tensor-parallel rank (Note [GEMMs by shape]).
//
// Note [GEMMs by shape]
// A GEMM's rate falls with its reduction length K as K / (K + gemm_half_k) (a short K leaves
// the tiles' prologue and epilogue, and the loads of C, uncovered). For a product in -> out,
// the forward's K is `in` and the dx's is `out`, and tensor parallelism divides one of them:
// a column-parallel product (split along its outputs: q, k, v, c_attn, c_fc, gate, up and the
// vocabulary-parallel head) has forward K = in and dx K = out / tp, a row-parallel one (o,
// c_proj, down) forward K = in / tp and dx K = out. Which one a product is comes from the
// family's ParameterShape: the weight whose dimensions are {in, out} and the extent of its
// split_dim (a square product has the same K's either way). dW's K is the micro-batch's rows
// (gemm_half_rows covers it). With gemm_half_k = 0 every product runs at the rows' rate, as
// before; `trident calibrate` fits it from the model's GEMMs at its width and at half of it.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "models/model_shapes.h"
#include "planner/cluster.h"

namespace trident::planner {

struct ProductSeconds {
  double forward = 0.0;   // per token: the forward GEMMs
  double backward = 0.0;  // per token: the dx and dW GEMMs
};

// `products` (in, out) on one of `tp` ranks (tp_split: whether tensor parallelism divides them;
// a mixture's experts are not), at `rows` rows per GEMM. `trains`, if given, says per product
// whether its weight trains: a frozen weight's product has no dW GEMM.
ProductSeconds product_seconds(const std::vector<std::pair<int64_t, int64_t>>& products,
                               const models::ModelShapes& shapes, int64_t tp, bool tp_split, const Cluster& cluster,
                               DType dtype, double rows, const std::vector<bool>* trains = nullptr);

// Whether the product in -> out is row-parallel (split along its inputs) in `shapes`.
bool row_parallel(const models::ModelShapes& shapes, int64_t in, int64_t out);

}  // namespace trident::planner
