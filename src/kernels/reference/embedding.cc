#include "kernels/reference/embedding.h"

#include "core/check.h"

namespace trident::reference {

Array embedding(const Array& weight, const Array& indices) {
  TRI_CHECK(weight.dim() == 2, "reference embedding: weight must be (V, C), got ", weight.shape);
  const int64_t V = weight.shape[0], C = weight.shape[1];
  Shape out_shape = indices.shape;
  out_shape.push_back(C);
  Array out(out_shape);
  for (int64_t n = 0; n < indices.numel(); ++n) {
    const int64_t row = static_cast<int64_t>(indices[n]);
    TRI_CHECK(row >= 0 && row < V && static_cast<double>(row) == indices[n],
              "reference embedding: index ", indices[n], " at ", n, " is not in [0, ", V, ")");
    for (int64_t c = 0; c < C; ++c) out[n * C + c] = weight[row * C + c];
  }
  return out;
}

}  // namespace trident::reference
