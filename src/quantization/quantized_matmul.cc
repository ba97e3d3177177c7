#include "quantization/quantized_matmul.h"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "core/check.h"
#include "core/parallel.h"
#include "kernels/cpu/matmul.h"

namespace trident::quantization {
namespace {

using kernels::cpu::gemm;
using kernels::cpu::gemm_to_f32;

constexpr int64_t kTileElements = int64_t{1} << 18;  // 1 MiB of f32: an L2's share

// Rows [r0, r1) of the weight (each `cols` long), dequantized into `tile`.
template <class T>
void dequantize_rows(const QuantizedWeight& w, int64_t r0, int64_t r1, int64_t cols, T* tile) {
  w.dequantize_into(r0 * cols, r1 * cols, dtype_of<T>(), tile);
}

// out (M, cols) = a (M, rows) @ W (rows, cols), a's row stride lda: a sum over the tiles of W's
// rows.
template <class T>
void product_over_rows(const T* a, int64_t lda, int64_t M, const QuantizedWeight& w, int64_t rows, int64_t cols, T* out) {
  const int64_t R = quantized_tile_rows(rows, cols);
  std::vector<T> tile(static_cast<size_t>(R * cols));
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    for (int64_t r0 = 0; r0 < rows; r0 += R) {
      const int64_t r1 = std::min(rows, r0 + R);
      dequantize_rows(w, r0, r1, cols, tile.data());
      gemm<T>(false, false, M, cols, r1 - r0, 1.0f, a + r0, lda, tile.data(), cols, r0 == 0 ? 0.0f : 1.0f, out, cols);
    }
    if (rows == 0) std::fill(out, out + M * cols, T(0));
  } else {
    std::vector<float> acc(static_cast<size_t>(M * cols), 0.0f);
    for (int64_t r0 = 0; r0 < rows; r0 += R) {
      const int64_t r1 = std::min(rows, r0 + R);
      dequantize_rows(w, r0, r1, cols, tile.data());
      gemm_to_f32<T>(false, false, M, cols, r1 - r0, 1.0f, a + r0, lda, tile.data(), cols, r0 == 0 ? 0.0f : 1.0f,
                     acc.data(), cols);
    }
    for (int64_t i = 0; i < M * cols; ++i) out[i] = static_cast<T>(acc[static_cast<size_t>(i)]);
  }
}

// out (M, rows), row stride ldo = a (M, cols) @ W^T for W (rows, cols): each tile of W's rows
// writes its block of out's columns.
template <class T>
void product_with_rows(const T* a, int64_t M, const QuantizedWeight& w, int64_t rows, int64_t cols, T* out) {
  const int64_t R = quantized_tile_rows(rows, cols);
  std::vector<T> tile(static_cast<size_t>(R * cols));
  for (int64_t r0 = 0; r0 < rows; r0 += R) {
    const int64_t r1 = std::min(rows, r0 + R);
    dequantize_rows(w, r0, r1, cols, tile.data());
    gemm<T>(false, true, M, r1 - r0, cols, 1.0f, a, cols, tile.data(), cols, 0.0f, out + r0, rows);
  }
}

void check_weight(const QuantizedWeight& w) {
  TRI_CHECK(w.shape().size() == 2, w.scheme(), " product: the weight is ", w.shape(), ", not a matrix");
  TRI_CHECK(w.device().is_cpu(), w.scheme(), " product: the weight is on ", w.device().str(), "; this product runs on the host");
}

template <class T>
void add_bias_rows_impl(T* y, int64_t M, int64_t n, const T* bias) {
  parallel_for(0, M, std::max<int64_t>(1, 65536 / std::max<int64_t>(n, 1)), [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m)
      for (int64_t o = 0; o < n; ++o) y[m * n + o] += bias[o];
  });
}

}  // namespace

void add_bias_rows(float* y, int64_t M, int64_t n, const float* bias) { add_bias_rows_impl(y, M, n, bias); }
void add_bias_rows(double* y, int64_t M, int64_t n, const double* bias) { add_bias_rows_impl(y, M, n, bias); }

int64_t quantized_tile_rows(int64_t rows, int64_t row_length) {
  int64_t r = std::max<int64_t>(1, kTileElements / std::max<int64_t>(1, row_length));
  if (r > 64) r -= r % 64;  // whole blocks of the GEMM's rows
  return std::max<int64_t>(1, std::min(r, rows));
}

template <class T>
void quantized_matmul(const T* x, int64_t M, const QuantizedWeight& w, bool in_out, T* y, const T* bias) {
  check_weight(w);
  const int64_t rows = w.shape()[0], cols = w.shape()[1];
  if (M == 0) return;
  if (!in_out && w.fused_product(dtype_of<T>(), x, M, y, bias)) return;
  if (in_out) product_over_rows(x, rows, M, w, rows, cols, y);  // y = x W, W (in, out)
  else product_with_rows(x, M, w, rows, cols, y);               // y = x W^T, W (out, in)
  if (bias == nullptr) return;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    add_bias_rows(y, M, in_out ? cols : rows, bias);
  } else {
    TRI_CHECK(false, w.scheme(), " product: a bias is added here in f32 and f64 only, given ", dtype_of<T>());
  }
}

template <class T>
void quantized_matmul_input_grad(const T* dy, int64_t M, const QuantizedWeight& w, bool in_out, T* dx) {
  check_weight(w);
  const int64_t rows = w.shape()[0], cols = w.shape()[1];
  if (M == 0) return;
  if (in_out) product_with_rows(dy, M, w, rows, cols, dx);  // dx = dy W^T, W (in, out)
  else product_over_rows(dy, rows, M, w, rows, cols, dx);   // dx = dy W, W (out, in)
}

#define TRI_INSTANTIATE(T)                                                                \
  template void quantized_matmul<T>(const T*, int64_t, const QuantizedWeight&, bool, T*, const T*); \
  template void quantized_matmul_input_grad<T>(const T*, int64_t, const QuantizedWeight&, bool, T*);
TRI_FOR_EACH_FLOATING_TYPE(TRI_INSTANTIATE)
#undef TRI_INSTANTIATE

}  // namespace trident::quantization
