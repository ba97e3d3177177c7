#include "planner/gemm_time.h"

namespace trident::planner {

bool row_parallel(const models::ModelShapes& shapes, int64_t in, int64_t out) {
  if (in == out) return false;  // the same K's either way (Note [GEMMs by shape])
  for (const models::ParameterShape& p : shapes.parameters) {
    if (p.shape.size() != 2 || p.split_dim < 0) continue;
    const int64_t a = p.shape[0], b = p.shape[1];
    if (!((a == in && b == out) || (a == out && b == in))) continue;
    return p.shape[static_cast<size_t>(p.split_dim)] == in;
  }
  return false;  // no weight of that shape splits: column-parallel's K's (the larger)
}

ProductSeconds product_seconds(const std::vector<std::pair<int64_t, int64_t>>& products,
                               const models::ModelShapes& shapes, int64_t tp, bool tp_split, const Cluster& cluster,
                               DType dtype, double rows, const std::vector<bool>* trains) {
  ProductSeconds out;
  const double rate = cluster.gemm_flops(dtype, rows), h = cluster.device.gemm_half_k;
  const double split = tp_split ? static_cast<double>(tp) : 1.0;
  // 1 / (rate x K / (K + h)): the K's factor on top of the rows'.
  auto seconds_per_flop = [&](double k) { return h > 0.0 ? (1.0 + h / k) / rate : 1.0 / rate; };
  for (size_t i = 0; i < products.size(); ++i) {
    const auto& [in, out_features] = products[i];
    const bool dw = trains == nullptr || (*trains)[i];
    const double flops = 2.0 * static_cast<double>(in) * static_cast<double>(out_features) / split;
    const bool row = tp_split && tp > 1 && row_parallel(shapes, in, out_features);
    const double k_forward = static_cast<double>(in) / (row ? split : 1.0);
    const double k_dx = static_cast<double>(out_features) / (row ? 1.0 : split);
    out.forward += flops * seconds_per_flop(k_forward);
    out.backward += flops * (seconds_per_flop(k_dx) + (dw ? 1.0 / rate : 0.0));
  }
  return out;
}

}  // namespace trident::planner
