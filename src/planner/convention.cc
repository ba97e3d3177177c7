#include "planner/convention.h"

namespace trident::planner {

StatusOr<Convention> convention_named(const std::string& name, DType compute, const std::string& grad_compression) {
  const double element = static_cast<double>(element_size(compute));
  Convention c;
  c.name = name;
  if (name == "trident") {
    // The trainer's fp32 buffers; bf16 on the wire under grad_compression = "bf16" (PowerSGD
    // and 1-bit Adam priced uncompressed: their warm-up's traffic).
    if (grad_compression == "bf16") c.grad_comm_bytes = 2.0;
    return c;
  }
  if (name == "megatron") {
    c.grad_buffer_bytes = compute == DType::kF16 ? 2.0 : 4.0;
    c.grad_comm_bytes = c.grad_buffer_bytes;
    for (bool& o : c.overlaps_reduction) o = false;
    c.overlaps_gathers = false;
    for (bool& r : c.reduces_every_micro_batch) r = false;
    c.pipeline_scatter_gather = true;
    c.copies_into_buckets = false;
    return c;
  }
  if (name == "fsdp" ||
      name == "composer") {  // fp32 gradients and reduction; fsdp overlaps everything
    c.keeps_compute_shard = false;
    c.gathers_after_gradients = name == "composer";  // Composer's backward_prefetch = BACKWARD_POST
    // Note [Gradient passes a micro-batch]
    // grad_compression = "bf16": reduce_dtype bfloat16 (Composer's mixed_precision = PURE).
    if (grad_compression == "bf16") c.grad_comm_bytes = 2.0;
    c.fsdp_version = name == "composer" ? 1 : 2;
    return c;
  }
  if (name == "deepspeed") {
    c.grad_buffer_bytes = element;
    c.grad_comm_bytes = element;
    c.overlaps_reduction[0] = c.overlaps_reduction[1] = c.overlaps_reduction[2] = false;
    return c;
  }
  std::string allowed;
  for (const char* n : kConventionNames) allowed += std::string(allowed.empty() ? "" : ", ") + n;
  return Status::invalid("plan: --convention '" + name + "' is not a framework convention the planner knows (" +
                         allowed + ")");
}

std::optional<double> fsdp_gradient_pass_bytes(const Convention& convention, DType compute,
                                               int zero_stage, int64_t dp) {
  if (convention.fsdp_version == 0 || zero_stage < 2) return std::nullopt;
  const double E = static_cast<double>(element_size(compute)), R = convention.grad_comm_bytes;
  const DType reduced = R == 2.0 ? DType::kBF16 : DType::kF32;
  if (convention.fsdp_version == 1) {
    const double concatenate = 2.0 * E, cast = compute == reduced ? 0.0 : E + R;
    const double predivide = dp > 1 ? 2.0 * R : 0.0;  // the factor is 1 on one rank
    return concatenate + cast + predivide;
  }
  const double gathers = zero_stage == 3 ? 2.0 : 1.0;  // the backward gathers again under ZeRO-3
  return E + R + gathers * 2.0 * E;
}

}  // namespace trident::planner
