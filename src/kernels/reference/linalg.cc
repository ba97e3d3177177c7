#include "kernels/reference/linalg.h"

namespace trident::reference {

Array matmul(const Array& a, const Array& b) {
  const int64_t M = a.shape[a.dim() - 2], K = a.shape[a.dim() - 1], N = b.shape[b.dim() - 1];
  Shape ab = a.shape, bb = b.shape;
  ab.resize(a.dim() - 2);
  bb.resize(b.dim() - 2);
  const Shape batch = broadcast_shapes(ab, bb, "reference matmul");
  Shape out_shape = batch;
  out_shape.push_back(M);
  out_shape.push_back(N);
  Array out(out_shape);
  int64_t idx[Dims::kMaxDims], ia[Dims::kMaxDims], ib[Dims::kMaxDims];
  const int nb = batch.size();
  for (int64_t bi = 0; bi < batch.product(); ++bi) {
    unravel_index(bi, batch, idx);
    for (int i = 0; i < ab.size(); ++i) ia[i] = ab[i] == 1 ? 0 : idx[nb - ab.size() + i];
    for (int i = 0; i < bb.size(); ++i) ib[i] = bb[i] == 1 ? 0 : idx[nb - bb.size() + i];
    const int64_t a0 = flat_index(ab, ia) * M * K, b0 = flat_index(bb, ib) * K * N;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0.0;
        for (int64_t k = 0; k < K; ++k) s += a[a0 + m * K + k] * b[b0 + k * N + n];
        out[bi * M * N + m * N + n] = s;
      }
  }
  return out;
}

Array linear(const Array& x, const Array& w, const std::optional<Array>& bias) {
  const int64_t out_f = w.shape[0], in = w.shape[1], rows = x.numel() / in;
  Shape out_shape = x.shape;
  out_shape[out_shape.size() - 1] = out_f;
  Array out(out_shape);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out_f; ++o) {
      double s = bias ? (*bias)[o] : 0.0;
      for (int64_t i = 0; i < in; ++i) s += x[r * in + i] * w[o * in + i];
      out[r * out_f + o] = s;
    }
  return out;
}

}  // namespace trident::reference
