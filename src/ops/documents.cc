#include "ops/documents.h"

#include "core/check.h"
#include "core/factory.h"

namespace trident::ops {

Documents documents_from_positions(const Tensor& positions, Device device) {
  TRI_CHECK(positions.dim() == 2, "documents: position ids must be (B, T), got ", positions.shape());
  TRI_CHECK_TYPE(is_integral(positions.dtype()), "documents: position ids must be integers, got ", positions.dtype());
  const int64_t B = positions.size(0), T = positions.size(1);
  const std::vector<int64_t> pos = to_vector<int64_t>(positions);
  std::vector<int64_t> start(pos.size()), end(pos.size());
  for (int64_t b = 0; b < B; ++b) {
    const int64_t* p = pos.data() + b * T;
    for (int64_t t = 0; t < T; ++t) {
      TRI_CHECK(p[t] >= 0, "documents: position id ", p[t], " at row ", b, ", index ", t, " is negative");
      TRI_CHECK(t == 0 || p[t] == 0 || p[t] == p[t - 1] + 1, "documents: position id ", p[t], " at row ", b,
                ", index ", t, " follows ", p[t - 1], ": a position is 0 (a new document) or the one before plus 1");
      start[b * T + t] = p[t] == 0 || t == 0 ? t : start[b * T + t - 1];
    }
    for (int64_t t = T - 1; t >= 0; --t) end[b * T + t] = t + 1 == T || p[t + 1] == 0 ? t + 1 : end[b * T + t + 1];
  }
  auto make = [&](const std::vector<int64_t>& v) {
    return core::to_device(from_vector(v, {B, T}), device);
  };
  return {make(pos), make(start), make(end)};
}

Tensor positions_after(const Tensor& ids, int64_t end_of_document) {
  TRI_CHECK(ids.dim() == 2, "positions_after: token ids must be (B, T), got ", ids.shape());
  const int64_t B = ids.size(0), T = ids.size(1);
  const std::vector<int64_t> tok = to_vector<int64_t>(ids);
  std::vector<int64_t> pos(tok.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      pos[b * T + t] = t == 0 || tok[b * T + t - 1] == end_of_document ? 0 : pos[b * T + t - 1] + 1;
  return from_vector(pos, {B, T});
}

}  // namespace trident::ops
