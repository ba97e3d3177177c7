#include "ops/grouped_linear.h"

#include <string>

#include "core/copy.h"
#include "core/factory.h"
#include "core/parallel.h"
#include "kernels/cpu/matmul.h"
#include "ops/dispatch.h"

namespace trident::ops {
namespace {

// One group's product C = op(A) op(B), row-major operands of the group's dtype.
struct Product {
  bool trans_a = false, trans_b = false;
  int64_t M = 0, N = 0, K = 0;
  const void* a = nullptr;
  int64_t lda = 0;
  const void* b = nullptr;
  int64_t ldb = 0;
  void* c = nullptr;
  int64_t ldc = 0;
};

// Note [Grouped products].
void run_products(const std::vector<Product>& products, DType dtype, const Device& device) {
  if (!device.is_cpu()) {
    for (const Product& p : products) {
      kernels::GemmArgs g;
      g.dtype = g.c_dtype = dtype;
      g.trans_a = p.trans_a, g.trans_b = p.trans_b;
      g.M = p.M, g.N = p.N, g.K = p.K;
      g.a = p.a, g.lda = p.lda, g.b = p.b, g.ldb = p.ldb, g.c = p.c, g.ldc = p.ldc;
      kernels::device_kernels(device).gemm(g);
    }
    return;
  }
  std::vector<const Product*> small, large;
  for (const Product& p : products)
    (p.M <= kernels::cpu::kGemmBlock && p.N <= kernels::cpu::kGemmBlock ? small : large).push_back(&p);
  dispatch_floating(dtype, "grouped_linear", [&]<class T>() {
    auto run = [](const Product& p, auto gemm) {
      gemm(p.trans_a, p.trans_b, p.M, p.N, p.K, 1.0f, static_cast<const T*>(p.a), p.lda, static_cast<const T*>(p.b),
           p.ldb, 0.0f, static_cast<T*>(p.c), p.ldc);
    };
    parallel_for(0, static_cast<int64_t>(small.size()), 1, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) run(*small[static_cast<size_t>(i)], kernels::cpu::gemm_serial<T>);
    });
    for (const Product* p : large) run(*p, kernels::cpu::gemm<T>);
  });
}

void check_groups(const char* what, const Tensor& x, const std::vector<Tensor>& weights,
                  const std::vector<int64_t>& offsets, int64_t weight_dim) {
  check_floating(x, what);
  TRI_CHECK(x.dim() == 2, what, ": expected a matrix of rows (M, features), got ", x.shape());
  TRI_CHECK(!weights.empty() && offsets.size() == weights.size() + 1, what, ": ", weights.size(), " weights need ",
            weights.size() + 1, " group offsets, got ", offsets.size());
  TRI_CHECK(offsets.front() == 0 && offsets.back() == x.size(0), what, ": group offsets must run from 0 to the ",
            x.size(0), " rows, got ", offsets.front(), " .. ", offsets.back());
  for (size_t e = 0; e < weights.size(); ++e) {
    const std::string which = std::string(what) + " (weight " + std::to_string(e) + ")";
    TRI_CHECK(offsets[e] <= offsets[e + 1], what, ": group offsets must not decrease (", offsets[e], " then ",
              offsets[e + 1], " at group ", e, ")");
    check_same_dtype(x, weights[e], which.c_str());
    check_same_device(x, weights[e], which.c_str());
    TRI_CHECK(weights[e].dim() == 2 && weights[e].shape() == weights[0].shape(), which, ": expected (out, in) like ",
              "weight 0's ", weights[0].shape(), ", got ", weights[e].shape());
    TRI_CHECK(weights[e].size(weight_dim) == x.size(1), what, ": rows of ", x.size(1), " features against weight ",
              weights[e].shape(), " (dim ", weight_dim, " must match)");
  }
}

}  // namespace

namespace {

// Group e's rows of a (M, K) times weights[e] (stored (out, in)): transposed (W_e^T, the forward)
// or not (W_e, the input's gradient), into a new (M, N) matrix.
Tensor per_group_product(const char* what, const Tensor& a_in, const std::vector<Tensor>& weights_in,
                         const std::vector<int64_t>& offsets, bool transposed) {
  check_groups(what, a_in, weights_in, offsets, transposed ? 1 : 0);
  const Tensor a = core::contiguous(a_in);
  std::vector<Tensor> weights;
  for (const Tensor& w : weights_in) weights.push_back(core::contiguous(w));
  const int64_t K = a.size(1), N = weights[0].size(transposed ? 0 : 1), ldw = weights[0].size(1);
  if (K == 0 || N == 0) return zeros({a.size(0), N}, a.dtype(), a.device());
  Tensor out = empty({a.size(0), N}, a.dtype(), a.device());
  const size_t esize = element_size(a.dtype());
  std::vector<Product> products;
  for (size_t e = 0; e < weights.size(); ++e) {
    const int64_t rows = offsets[e + 1] - offsets[e];
    if (rows == 0) continue;
    products.push_back({false, transposed, rows, N, K, static_cast<const char*>(a.raw_data()) + offsets[e] * K * esize,
                        K, weights[e].raw_data(), ldw, static_cast<char*>(out.raw_data()) + offsets[e] * N * esize, N});
  }
  run_products(products, a.dtype(), a.device());
  return out;
}

}  // namespace

Tensor grouped_linear(const Tensor& x, const std::vector<Tensor>& weights, const std::vector<int64_t>& offsets) {
  return per_group_product("grouped_linear", x, weights, offsets, /*transposed=*/true);  // y_e = x_e W_e^T
}

Tensor grouped_linear_backward_input(const Tensor& dy, const std::vector<Tensor>& weights,
                                     const std::vector<int64_t>& offsets) {
  return per_group_product("grouped_linear_backward_input", dy, weights, offsets, /*transposed=*/false);  // dy_e W_e
}

std::vector<Tensor> grouped_linear_backward_weights(const Tensor& dy_in, const Tensor& x_in,
                                                   const std::vector<int64_t>& offsets) {
  check_floating(dy_in, "grouped_linear_backward_weights");
  check_same_dtype(dy_in, x_in, "grouped_linear_backward_weights");
  check_same_device(dy_in, x_in, "grouped_linear_backward_weights");
  TRI_CHECK(offsets.size() >= 2, "grouped_linear_backward_weights: ", offsets.size(), " group offsets (at least 2)");
  TRI_CHECK(dy_in.dim() == 2 && x_in.dim() == 2 && dy_in.size(0) == x_in.size(0) && offsets.front() == 0 &&
                offsets.back() == x_in.size(0),
            "grouped_linear_backward_weights: dy ", dy_in.shape(), " and x ", x_in.shape(), " do not match ",
            offsets.size() - 1, " groups ending at row ", offsets.back());
  const Tensor dy = core::contiguous(dy_in), x = core::contiguous(x_in);
  const int64_t out_features = dy.size(1), in = x.size(1);
  const size_t esize = element_size(dy.dtype());
  std::vector<Tensor> dw;
  std::vector<Product> products;
  for (size_t e = 0; e + 1 < offsets.size(); ++e) {
    const int64_t rows = offsets[e + 1] - offsets[e];
    if (rows == 0 || out_features == 0 || in == 0) {
      dw.push_back(zeros({out_features, in}, dy.dtype(), dy.device()));
      continue;
    }
    dw.push_back(empty({out_features, in}, dy.dtype(), dy.device()));
    // dW_e = dy_e^T x_e
    products.push_back({true, false, out_features, in, rows,
                        static_cast<const char*>(dy.raw_data()) + offsets[e] * out_features * esize, out_features,
                        static_cast<const char*>(x.raw_data()) + offsets[e] * in * esize, in, dw.back().raw_data(), in});
  }
  run_products(products, dy.dtype(), dy.device());
  return dw;
}

}  // namespace trident::ops
