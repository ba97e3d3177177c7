#include "models/block_stack.h"

#include "autograd/functions.h"

namespace trident::models {

Tensor run_block_stack(const std::function<Tensor(int64_t i, const Tensor& x)>& block, int64_t begin, int64_t end,
                       const Tensor& x, const std::string& checkpointing, bool training, Generator* dropout,
                       nn::PartHooks* hooks) {
  Tensor out = x;
  for (int64_t i = begin; i < end; ++i) {
    nn::PartForward run;
    if (checkpointing == "none" || !training) {
      run = [&block, i](const Tensor& in) { return block(i, in); };
    } else {
      const RecomputePolicy policy =
          checkpointing == "full" ? RecomputePolicy::kEverything : RecomputePolicy::kAllButMatmuls;
      // The rerun happens in the backward, after this call: it keeps its own copy of `block`.
      run = [block, i, policy, dropout](const Tensor& in) {
        return trident::activation_checkpoint([block, i](const TensorList& r) { return block(i, r[0]); }, {in}, policy,
                                              dropout);
      };
    }
    out = nn::run_part(hooks, static_cast<size_t>(i) + 1, run, out);
  }
  return out;
}

}  // namespace trident::models
