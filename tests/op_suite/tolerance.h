// Tolerances derived from numerics (docs/numerics.md), never tuned per case.
//
// Comparing a result y against a float64 reference r (element i):
//     |y_i - r_i| <= c * u * (|r_i| + sqrt(K) * rms(r))
// u is the unit roundoff of the storage dtype (2^-24 f32, 2^-8 bf16, 2^-11 f16, 2^-53 f64):
// one rounding of the result costs u*|r_i|. K is the case's reduction length: a sum of K
// terms each carrying a rounding error of relative size u grows like sqrt(K) (random-walk
// bound), measured against the typical magnitude of the result (its RMS) because a sum with
// cancellation can be small while its terms are not. c = 8 allows a few roundings in a row
// (a backward rule that chains ops rounds several times).
//
// Finite differences: 4-point central differences with step h = 1e-3 have truncation error
// O(h^4 f^(5)) ~ 1e-12 and roundoff ~ eps64 * sum|terms of L| / h; we accept 1e-7 relative to
// the gradient's magnitude (five orders above the method's error, far below any real bug)
// plus an absolute floor of 16 times the roundoff bound, so that a gradient that is exactly
// zero (e.g. dq of a one-token causal attention) can be checked too.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>

#include "core/dtype.h"
#include "kernels/reference/array.h"

namespace trident::testing {

inline constexpr double kFiniteDifferenceStep = 1e-3;
inline constexpr double kRoundingsAllowed = 8.0;

struct Tolerance {
  double relative;   // multiplies |r_i|
  double scaled;     // multiplies rms(r)
  std::string why;
  double absolute = 0.0;

  static Tolerance for_dtype(DType dtype, int64_t reduction_length) {
    const double u = unit_roundoff(dtype);
    const double k = std::sqrt(static_cast<double>(std::max<int64_t>(reduction_length, 1)));
    std::ostringstream why;
    why << kRoundingsAllowed << " * u(" << dtype_name(dtype) << ") * (|ref| + sqrt(K=" << reduction_length
        << ") * rms(ref))";
    return {kRoundingsAllowed * u, kRoundingsAllowed * u * k, why.str()};
  }
  // loss_terms: sum of |upstream_i * output_i| over the outputs, the size of L's terms.
  static Tolerance finite_difference(double loss_terms) {
    const double floor = 16.0 * 0x1p-53 * loss_terms / kFiniteDifferenceStep;
    std::ostringstream why;
    why << "1e-7 * (|ref| + rms(ref)) + " << floor << " (roundoff floor), 4-point FD with h=1e-3";
    return {1e-7, 1e-7, why.str(), floor};
  }
};

inline double rms(const reference::Array& a) {
  double s = 0.0;
  for (double v : a.data) s += v * v;
  return a.numel() ? std::sqrt(s / static_cast<double>(a.numel())) : 0.0;
}

// Element-wise comparison printing the first failures with index, expected, got, the
// difference and the tolerance.
inline void expect_close(const std::string& what, const reference::Array& got,
                         const reference::Array& want, const Tolerance& tol) {
  ASSERT_EQ(got.shape, want.shape) << what << ": shape mismatch";
  const double scale = rms(want);
  int64_t failures = 0;
  double worst = 0.0;
  std::ostringstream first;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double allowed = tol.absolute + tol.relative * std::fabs(want[i]) + tol.scaled * scale;
    const double diff = std::fabs(got[i] - want[i]);
    const bool ok = diff <= allowed || (std::isnan(got[i]) && std::isnan(want[i])) ||
                    (std::isinf(want[i]) && got[i] == want[i]);
    if (allowed > 0) worst = std::max(worst, diff / allowed);
    if (!ok) {
      if (failures < 5)
        first << "\n  [" << i << "] expected " << want[i] << ", got " << got[i] << ", diff "
              << diff << ", tolerance " << allowed;
      ++failures;
    }
  }
  EXPECT_EQ(failures, 0) << what << ": " << failures << " of " << want.numel()
                         << " elements out of tolerance (" << tol.why << "; worst error/tolerance "
                         << worst << ")" << first.str();
}

}  // namespace trident::testing
