#include "config/duration.h"

#include <charconv>
#include <cmath>

namespace trident::config {
namespace {

// A non-negative decimal number at the front of `s`, consumed.
std::optional<double> take_number(std::string_view& s) {
  double v = 0.0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v, std::chars_format::fixed);
  if (r.ec != std::errc() || r.ptr == s.data() || !std::isfinite(v) || v < 0.0 || s.front() == '-' ||
      s.front() == '+')
    return std::nullopt;
  s.remove_prefix(static_cast<size_t>(r.ptr - s.data()));
  return v;
}

// Exactly two digits at the front of `s` below `limit`, consumed.
std::optional<int> take_two_digits(std::string_view& s, int limit) {
  if (s.size() < 2 || s[0] < '0' || s[0] > '9' || s[1] < '0' || s[1] > '9') return std::nullopt;
  const int v = (s[0] - '0') * 10 + (s[1] - '0');
  s.remove_prefix(2);
  if (v >= limit) return std::nullopt;
  return v;
}

// [D-]HH:MM:SS
std::optional<double> parse_clock(std::string_view s) {
  double days = 0.0;
  if (const size_t dash = s.find('-'); dash != std::string_view::npos) {
    std::string_view d = s.substr(0, dash);
    int v = 0;
    const auto r = std::from_chars(d.data(), d.data() + d.size(), v);
    if (d.empty() || r.ec != std::errc() || r.ptr != d.data() + d.size() || v < 0) return std::nullopt;
    days = v;
    s.remove_prefix(dash + 1);
  }
  int hours = 0;
  {
    const size_t colon = s.find(':');
    if (colon == std::string_view::npos || colon == 0) return std::nullopt;
    std::string_view h = s.substr(0, colon);
    const auto r = std::from_chars(h.data(), h.data() + h.size(), hours);
    if (r.ec != std::errc() || r.ptr != h.data() + h.size() || hours < 0) return std::nullopt;
    s.remove_prefix(colon + 1);
  }
  const auto minutes = take_two_digits(s, 60);
  if (!minutes || s.empty() || s.front() != ':') return std::nullopt;
  s.remove_prefix(1);
  const auto seconds = take_two_digits(s, 60);
  if (!seconds || !s.empty()) return std::nullopt;
  return days * 86400.0 + hours * 3600.0 + *minutes * 60.0 + *seconds;
}

}  // namespace

std::optional<double> parse_duration(std::string_view text) {
  if (text == "0") return 0.0;
  if (text.empty()) return std::nullopt;
  if (text.find(':') != std::string_view::npos) return parse_clock(text);
  // One or more <number><unit>, units in decreasing order, each at most once: 1d2h3m4.5s.
  constexpr std::string_view kUnits = "dhms";
  constexpr double kSeconds[] = {86400.0, 3600.0, 60.0, 1.0};
  double total = 0.0;
  size_t next_unit = 0;
  while (!text.empty()) {
    const std::optional<double> v = take_number(text);
    if (!v || text.empty()) return std::nullopt;  // a bare number has no unit
    const size_t unit = kUnits.find(text.front(), next_unit);
    if (unit == std::string_view::npos) return std::nullopt;
    total += *v * kSeconds[unit];
    next_unit = unit + 1;
    text.remove_prefix(1);
  }
  return total;
}

}  // namespace trident::config
