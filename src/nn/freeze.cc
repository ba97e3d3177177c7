#include "nn/freeze.h"


#include "core/check.h"
#include "core/options.h"

namespace trident::nn {

bool is_glob(const std::string& item) { return item.find_first_of("*?") != std::string::npos; }

bool ends_with_component(const std::string& path, const std::string& name) {
  return path == name || (path.size() > name.size() && path.ends_with(name) && path[path.size() - name.size() - 1] == '.');
}

bool names_module(const std::string& item, const std::string& path) {
  return is_glob(item) ? parameter_pattern_matches(item, path) : ends_with_component(path, item);
}

bool parameter_pattern_matches(const std::string& pattern, const std::string& name) {
  // Iterative glob with one backtrack point (the last '*'): linear in practice.
  size_t p = 0, n = 0, star = std::string::npos, resume = 0;
  while (n < name.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[n])) {
      ++p;
      ++n;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = n;
    } else if (star != std::string::npos) {
      p = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::vector<bool> frozen_by(const std::vector<std::string>& names, const std::string& patterns, const std::string& where) {
  const std::vector<std::string> items = list_items(patterns);
  for (const std::string& pattern : items) {
    bool any = false;
    for (const std::string& name : names) any = any || parameter_pattern_matches(pattern, name);
    const std::optional<std::string> near = closest_match(pattern, names);
    TRI_CHECK(any, where, ": '", pattern, "' matches no parameter of the model",
              near ? " (did you mean '" + *near + "'?)" : "",
              "; names are dotted paths such as '", names.empty() ? "" : names.front(),
              "', and '*' matches any characters");
  }
  std::vector<bool> frozen(names.size(), false);
  for (size_t i = 0; i < names.size(); ++i)
    for (const std::string& pattern : items) frozen[i] = frozen[i] || parameter_pattern_matches(pattern, names[i]);
  return frozen;
}

std::vector<std::string> freeze_parameters(Module& module, const std::string& patterns, const std::string& where) {
  const std::vector<NamedTensor> params = module.named_parameters();
  std::vector<std::string> names;
  for (const auto& [name, p] : params) names.push_back(name);
  const std::vector<bool> flags = frozen_by(names, patterns, where);
  std::vector<std::string> frozen;
  for (size_t i = 0; i < params.size(); ++i) {
    if (!flags[i]) continue;
    Tensor(params[i].second).set_requires_grad(false);
    frozen.push_back(names[i]);
  }
  return frozen;
}

}  // namespace trident::nn
