// The model sizes the benches and the planner's tests use by name (bench/train_speed_compare.py's):
//   tiny  GPT-2 L=4  C=256 NH=4  T=256  B=8
//   small GPT-2 L=6  C=512 NH=8  T=512  B=4
//   124M  GPT-2 L=12 C=768 NH=12 T=1024 B=4 (V = 50257 for all)
//   tiny-moe  tiny as a Mixtral-shaped llama: 2 kv heads, every MLP 4 experts of width 512,
//             top-2 (the planner's mixture of experts, issue #51)
#pragma once

#include <string>
#include <vector>

namespace trident::planner {

// "--section.key=value" overrides; throws naming the name and the known ones.
std::vector<std::string> named_config_overrides(const std::string& name);

}  // namespace trident::planner
