#pragma once
// Option checks whose messages say what is allowed. CLI11's PositiveNumber and NonNegativeNumber
// are ranges up to the largest double, which their message prints in full (over 300 digits).
#include <CLI/CLI.hpp>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>

namespace trident::cli {

// A number above `lowest` (or equal to it) and at most `highest` (no upper bound when it is
// infinite). CLI11's Range lets NaN through (every comparison with it is false) and prints its
// bounds as "0.000000".
inline CLI::Validator number_in(double lowest, bool or_equal, double highest, const std::string& name) {
  auto str = [](double v) {
    std::ostringstream os;
    os.precision(15);
    os << v;
    return os.str();
  };
  return CLI::Validator(
      [lowest, or_equal, highest, str](std::string& text) -> std::string {
        double v = 0.0;
        if (!CLI::detail::lexical_cast(text, v) || std::isnan(v)) return "Value " + text + " is not a number";
        if ((or_equal ? v >= lowest : v > lowest) && v <= highest) return "";
        return "Value " + text + " is not allowed: must be " + (or_equal ? ">= " : "> ") + str(lowest) +
               (std::isinf(highest) ? "" : " and <= " + str(highest));
      },
      name);
}

inline CLI::Validator number_above(double lowest, bool or_equal, const std::string& name) {
  return number_in(lowest, or_equal, std::numeric_limits<double>::infinity(), name);
}

inline const CLI::Validator kPositive = number_above(0.0, false, "POSITIVE");
inline const CLI::Validator kNonNegative = number_above(0.0, true, "NONNEGATIVE");

}  // namespace trident::cli
