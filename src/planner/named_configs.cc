#include "planner/named_configs.h"

#include "core/check.h"

namespace trident::planner {

std::vector<std::string> named_config_overrides(const std::string& name) {
  auto make = [](int L, int C, int NH, int T, int B) {
    return std::vector<std::string>{
        "--model.arch=gpt2", "--model.n_layer=" + std::to_string(L), "--model.n_embd=" + std::to_string(C),
        "--model.n_head=" + std::to_string(NH), "--model.block_size=" + std::to_string(T),
        "--data.seq_len=" + std::to_string(T), "--data.batch_size=" + std::to_string(B)};
  };
  if (name == "tiny") return make(4, 256, 4, 256, 8);
  if (name == "small") return make(6, 512, 8, 512, 4);
  if (name == "124M") return make(12, 768, 12, 1024, 4);
  if (name == "tiny-moe") {
    std::vector<std::string> o = make(4, 256, 4, 256, 8);
    o.insert(o.end(), {"--model.arch=llama", "--model.n_kv_heads=2", "--model.num_local_experts=4",
                       "--model.num_experts_per_tok=2", "--model.moe_intermediate_size=512"});
    return o;
  }
  TRI_CHECK(false, "unknown config name '", name, "': tiny, small, 124M or tiny-moe");
  return {};
}

}  // namespace trident::planner
