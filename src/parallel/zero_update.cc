#include "parallel/zero_update.h"

#include <cmath>
#include <limits>

namespace trident::parallel {

StepOutcome ZeroUpdate::step(const StepContext& ctx) {
  // ZeRO unscales fp16's gradients while it measures their norm; a non-finite norm is an
  // overflow. Every rank decides alike: the replicated parameters' squares are not summed
  // over tensor parallelism, so the norm need not be bit-identical across its ranks.
  StepOutcome out;
  out.grad_norm = zero_->clip_grad_norm(ctx.max_norm, ctx.scaler->scale());
  const bool apply = !ctx.loss_scaling || ctx.scaler->update(!ctx.all_ranks(std::isfinite(out.grad_norm)));
  if (apply) {
    zero_->step(ctx.lr);
  } else {
    zero_->skip_step();
    out.grad_norm = std::numeric_limits<double>::quiet_NaN();  // not measured: the gradients overflowed
  }
  out.skipped = !apply;
  return out;
}

void ZeroUpdate::load_state(const CheckpointSource& source, bool with_state, int64_t step) {
  // This rank's partition of each tensor, read from whichever pieces the writer left.
  zero_->load(source.range, with_state, step);
  if (zero_->reducer()) zero_->reducer()->load_state(source.of_rank, step);
}

}  // namespace trident::parallel
