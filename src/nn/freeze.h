// Freezing parameters: a frozen parameter keeps its values for the whole run. It requires no
// gradient (autograd computes none for it), and parallel/parallelize.h gives it no optimizer
// state, no gradient reduction and no place in ZeRO's shards (Note [Placements] in
// parallel/placement.h). What train.freeze does, and what an adapter does to its base layer.
#pragma once

#include <string>
#include <vector>

#include "nn/module.h"

namespace trident::nn {

// Whether parameter name `name` matches `pattern`: '*' matches any run of characters (dots
// included: "h.0.*" is everything in block 0), '?' one character, everything else itself.
bool parameter_pattern_matches(const std::string& pattern, const std::string& name);

// Whether a list item is a glob (has '*' or '?').
bool is_glob(const std::string& item);
// Whether `path` is `name` or ends with "." + name: PEFT's rule for target_modules.
bool ends_with_component(const std::string& path, const std::string& name);
// Whether a layer list's item (lora.target_modules, quantization.skip_modules) names the module
// at `path`: a glob over the whole path, or else PEFT's suffix rule.
bool names_module(const std::string& item, const std::string& path);

// Which of the parameter names `names` (in model order) the comma-separated `patterns` match,
// each item checked as freeze_parameters checks it (a pattern matching no name throws naming
// `where`). What freeze_parameters freezes, on names alone: the planner's train.freeze.
std::vector<bool> frozen_by(const std::vector<std::string>& names, const std::string& patterns, const std::string& where);

// Freezes every parameter of `module` whose name matches one of `patterns`, a comma-separated
// list ("wte.weight,h.0.*"; blanks around items ignored, "" freezes nothing), and returns the
// names frozen, in model order. Throws naming `where` (the config key), the pattern and the
// closest parameter name when a pattern matches no parameter.
std::vector<std::string> freeze_parameters(Module& module, const std::string& patterns, const std::string& where);

}  // namespace trident::nn
