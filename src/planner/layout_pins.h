// The axes of a layout a user fixes before the planner searches the rest: `trident plan
// --layout "dp8 tp4 pp2 ..."` or its --parallel.* and --model.activation_checkpointing flags.
//
// Note [Pinned layouts]
// "What about the layout I run today?" is a planner user's first question, so a pinned axis
// narrows the search instead of being ignored, and a layout pinned whole is evaluated even
// where the search would leave it out: a pin lifts the search's own pruning (ZeRO over one
// data-parallel rank, fewer micro-batches than pipeline stages, tensor parallelism across
// nodes, a micro-batch above the space's limit) but never the trainer's check (planner/
// layout.h's trainer_accepts): a layout the trainer refuses gets the trainer's message.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "planner/layout.h"
#include "planner/run_spec.h"

namespace trident::planner {

struct LayoutPins {
  std::optional<int64_t> dp, ep, tp, pp, virtual_stages, zero_stage, micro_batch, accum;
  std::optional<std::string> checkpointing;
  std::optional<bool> sequence_parallel, offload;
  std::optional<bool> nvme;  // offload's state on the NVMe tier (true pins offload too)

  bool empty() const;
  // Whether `l` has every pinned value.
  bool admits(const Layout& l) const;
  // The pinned axes ("tp4 sequence_parallel=on zero1 ckpt=full"); "" when none.
  std::string str() const;
  // The ranks the pins name when dp is pinned: dp x ep x tp x pp, an unpinned ep, tp or pp 1;
  // else 0.
  int64_t ranks() const;
  // These pins over `base`'s: each axis pinned in either, this one's value where both are.
  LayoutPins over(const LayoutPins& base) const;
};

// Pins from a layout as Layout::str() writes it, any of its words in any order: "dp8",
// "ep2" (expert parallelism: Note [The planner's ep axis]), "tp4" or "tp4+sp" (sequence parallel), "pp2" or "pp2x3" (3 virtual stages: the
// interleaved schedule), "zero1", "zero1+offload" or "zero1+nvme" (the NVMe tier),
// "ckpt=none|selective|full", "b2" (the
// micro-batch), "m8" (micro-batches per step). An unknown or repeated word is an error naming
// it and what is allowed.
StatusOr<LayoutPins> parse_layout_pins(const std::string& text);

// Pins from a config's layout keys that the command line set: each of `overrides`
// ("--section.key=value", as trident plan takes them) naming parallel.tp, parallel.ep, parallel.pp,
// parallel.virtual_stages, parallel.zero_stage, parallel.sequence_parallel,
// parallel.offload_optimizer, parallel.offload_optimizer_device (nvme: the tier, which pins
// offload on too) or model.activation_checkpointing pins that axis to the value `cfg` holds
// (the overrides applied and checked).
LayoutPins pins_from_overrides(const train::TrainConfig& cfg, const std::vector<std::string>& overrides);

// Why no layout of `run` on `ranks` ranks has the pinned values: the first rule the pins break
// (the ranks' product, the step's sequences, the trainer's own check, with its message).
std::string why_no_pinned_layout(const RunSpec& run, int64_t ranks, const LayoutPins& pins);

}  // namespace trident::planner
