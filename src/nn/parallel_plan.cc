#include "nn/parallel_plan.h"

namespace trident::nn {

bool plan_pattern_matches(std::string_view pattern, std::string_view path) {
  while (true) {
    const size_t p = pattern.find('.'), q = path.find('.');
    const std::string_view a = pattern.substr(0, p), b = path.substr(0, q);
    if (a != "*" && a != b) return false;
    if (p == std::string_view::npos || q == std::string_view::npos) return p == q;
    pattern.remove_prefix(p + 1);
    path.remove_prefix(q + 1);
  }
}

}  // namespace trident::nn
