#include "parallel/update_strategy.h"

#include <cstring>

namespace trident::parallel {

std::string parameter_of_state(const std::string& name) {
  for (const char* suffix : {".exp_avg_sq", ".exp_avg"})
    if (name.ends_with(suffix)) return name.substr(0, name.size() - std::strlen(suffix));
  return name;
}

}  // namespace trident::parallel
