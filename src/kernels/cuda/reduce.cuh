// Reductions: sum over dims of a strided view (kernels/cpu/reduce.h), softmax / log_softmax
// over the middle axis of contiguous (outer, n, inner) (kernels/cpu/softmax.h), and the sum of
// squares behind the global gradient norm.
#pragma once

#include <cstdint>

namespace trident::cuda {

// out (contiguous, the kept dims in order) = scale * sum of in over the dims with reduce_dim[i].
// shape/strides have ndim entries (ndim <= 8 after the caller's checks); sums in double.
void launch_sum(int dtype, void* out, const void* in, const int64_t* shape, const int64_t* strides,
                const bool* reduce_dim, int ndim, double scale);
void launch_softmax_forward(bool log, int dtype, void* y, const void* x, int64_t outer, int64_t n, int64_t inner);
void launch_softmax_backward(bool log, int dtype, void* dx, const void* dy, const void* y, int64_t outer, int64_t n,
                             int64_t inner);
// Sum of x^2 in double over n contiguous elements; returned to the host (synchronizes).
double launch_sum_of_squares(int dtype, const void* x, int64_t n);
// The last pass of the fixed-order sums (sum of squares, the cross-entropy's row losses): adds
// n partial sums (device doubles) on one block in an order that depends on n alone, into
// *total (a device double), and returns it to the host after the default stream's earlier
// kernels (synchronizes). NaN if the copy fails; the error stays for cudaGetLastError.
double sum_partials_to_host(double* total, const double* partial, int64_t n);

}  // namespace trident::cuda
