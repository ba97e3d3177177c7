#include "planner/layout_pins.h"

#include <charconv>
#include <sstream>

#include "planner/fine_tuning.h"

namespace trident::planner {
namespace {

// The positive integer that is all of `digits`, or nullopt.
std::optional<int64_t> positive(std::string_view digits) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc() || end != digits.data() + digits.size() || v < 1) return std::nullopt;
  return v;
}

template <class T>
bool admits_one(const std::optional<T>& pin, const T& value) {
  return !pin || *pin == value;
}

}  // namespace

bool LayoutPins::empty() const { return str().empty(); }

bool LayoutPins::admits(const Layout& l) const {
  return admits_one(dp, l.dp) && admits_one(ep, l.ep) && admits_one(tp, l.tp) && admits_one(pp, l.pp) &&
         admits_one(virtual_stages, l.virtual_stages) && admits_one(zero_stage, l.zero_stage) &&
         admits_one(micro_batch, l.micro_batch) && admits_one(accum, l.accum) &&
         admits_one(checkpointing, l.checkpointing) && admits_one(sequence_parallel, l.sequence_parallel) &&
         admits_one(offload, l.offload) && admits_one(nvme, l.nvme);
}

std::string LayoutPins::str() const {
  std::ostringstream s;
  const char* sep = "";
  auto word = [&](const auto&... parts) {
    s << sep;
    (s << ... << parts);
    sep = " ";
  };
  auto on = [](bool b) { return b ? "on" : "off"; };
  if (dp) word("dp", *dp);
  if (ep) word("ep", *ep);
  if (tp) word("tp", *tp);
  if (sequence_parallel) word("sequence_parallel=", on(*sequence_parallel));
  if (pp) word("pp", *pp);
  if (virtual_stages) word("virtual_stages=", *virtual_stages);
  if (zero_stage) word("zero", *zero_stage);
  // Offload on: "offload=cpu" or "offload=nvme" where the device is pinned too.
  if (offload) word("offload=", *offload && nvme ? (*nvme ? "nvme" : "cpu") : on(*offload));
  else if (nvme) word("offload_device=", *nvme ? "nvme" : "cpu");
  if (checkpointing) word("ckpt=", *checkpointing);
  if (micro_batch) word("b", *micro_batch);
  if (accum) word("m", *accum);
  return s.str();
}

int64_t LayoutPins::ranks() const { return dp ? *dp * ep.value_or(1) * tp.value_or(1) * pp.value_or(1) : 0; }

LayoutPins LayoutPins::over(const LayoutPins& base) const {
  LayoutPins p = base;
  auto take = [](auto& into, const auto& from) {
    if (from) into = from;
  };
  take(p.dp, dp);
  take(p.ep, ep);
  take(p.tp, tp);
  take(p.pp, pp);
  take(p.virtual_stages, virtual_stages);
  take(p.zero_stage, zero_stage);
  take(p.micro_batch, micro_batch);
  take(p.accum, accum);
  take(p.checkpointing, checkpointing);
  take(p.sequence_parallel, sequence_parallel);
  take(p.offload, offload);
  take(p.nvme, nvme);
  return p;
}

StatusOr<LayoutPins> parse_layout_pins(const std::string& text) {
  LayoutPins p;
  const std::string allowed =
      "allowed words: dpN, epN, tpN or tpN+sp, ppN or ppNxV, zeroN, zeroN+offload or zeroN+nvme, "
      "ckpt=none|selective|full, bN, mN";
  auto bad = [&](const std::string& word, const std::string& why) {
    return Status::invalid("--layout '" + text + "': '" + word + "' " + why + " (" + allowed + ")");
  };
  std::istringstream words(text);
  std::string word;
  while (words >> word) {
    // Each word's own pins: a prefix, a number, and a suffix some prefixes allow.
    auto number = [&](std::string_view digits, std::optional<int64_t>& into) -> Status {
      const std::optional<int64_t> v = positive(digits);
      if (!v) return bad(word, "needs a whole number >= 1 after its letters");
      if (into) return bad(word, "repeats an axis given before");
      into = v;
      return Status::ok();
    };
    auto split = [](std::string_view suffix, std::string_view rest) {
      const bool has = rest.size() > suffix.size() && rest.ends_with(suffix);
      if (has) rest.remove_suffix(suffix.size());
      return std::pair{rest, has};
    };
    Status s = Status::ok();
    const std::string_view w = word;
    if (w.starts_with("ckpt=")) {
      const std::string mode(w.substr(5));
      if (mode != "none" && mode != "selective" && mode != "full") s = bad(word, "is not a checkpointing mode");
      else if (p.checkpointing) s = bad(word, "repeats an axis given before");
      else p.checkpointing = mode;
    } else if (w.starts_with("dp")) {
      s = number(w.substr(2), p.dp);
    } else if (w.starts_with("ep")) {
      s = number(w.substr(2), p.ep);
    } else if (w.starts_with("tp")) {
      auto [digits, sp] = split("+sp", w.substr(2));
      s = number(digits, p.tp);
      if (s.is_ok()) p.sequence_parallel = sp;
    } else if (w.starts_with("pp")) {
      std::string_view digits = w.substr(2);
      const size_t x = digits.find('x');
      if (x != std::string_view::npos) {
        s = number(digits.substr(x + 1), p.virtual_stages);
        digits = digits.substr(0, x);
      } else {
        p.virtual_stages = 1;
      }
      if (s.is_ok()) s = number(digits, p.pp);
    } else if (w.starts_with("zero")) {
      auto [rest, nvme] = split("+nvme", w.substr(4));
      auto [digits, off] = split("+offload", rest);
      if (nvme && off) {
        s = bad(word, "names two places for the optimizer state");
      } else if (digits == "0") {  // zero0: a stage, not a degree
        if (p.zero_stage) s = bad(word, "repeats an axis given before");
        else p.zero_stage = 0;
      } else {
        s = number(digits, p.zero_stage);
      }
      if (s.is_ok() && *p.zero_stage > 3) s = bad(word, "names no ZeRO stage (0 to 3)");
      if (s.is_ok()) {
        p.offload = off || nvme;
        p.nvme = nvme;
      }
    } else if (w.starts_with("b")) {
      s = number(w.substr(1), p.micro_batch);
    } else if (w.starts_with("m")) {
      s = number(w.substr(1), p.accum);
    } else {
      s = bad(word, "is not a layout word");
    }
    if (!s.is_ok()) return s;
  }
  if (p.empty()) return Status::invalid("--layout '" + text + "' names no axis (" + allowed + ")");
  return p;
}

LayoutPins pins_from_overrides(const train::TrainConfig& cfg, const std::vector<std::string>& overrides) {
  LayoutPins p;
  for (const std::string& o : overrides) {
    const std::string key = o.substr(0, o.find('='));
    if (key == "--parallel.tp") p.tp = cfg.parallel.tp;
    else if (key == "--parallel.ep") p.ep = cfg.parallel.ep;
    else if (key == "--parallel.pp") p.pp = cfg.parallel.pp;
    else if (key == "--parallel.virtual_stages") p.virtual_stages = cfg.parallel.virtual_stages;
    else if (key == "--parallel.zero_stage") p.zero_stage = cfg.parallel.zero_stage;
    else if (key == "--parallel.sequence_parallel") p.sequence_parallel = cfg.parallel.sequence_parallel;
    else if (key == "--parallel.offload_optimizer") p.offload = cfg.parallel.offload_optimizer;
    else if (key == "--parallel.offload_optimizer_device") p.nvme = cfg.parallel.offload_optimizer_device == "nvme";
    else if (key == "--model.activation_checkpointing") p.checkpointing = cfg.model.activation_checkpointing;
  }
  return p;
}

std::string why_no_pinned_layout(const RunSpec& run, int64_t ranks, const LayoutPins& pins) {
  const std::string head = "no layout of " + std::to_string(ranks) + " rank(s) has " + pins.str() + ": ";
  Layout l;
  l.tp = pins.tp.value_or(1);
  l.pp = pins.pp.value_or(1);
  l.ep = pins.ep.value_or(1);
  const std::string ep = l.ep > 1 ? "ep x " : "";  // named where pinned (Note [The planner's ep axis])
  if (ranks % (l.ep * l.tp * l.pp) != 0)
    return head + ep + "tp x pp = " + std::to_string(l.ep * l.tp * l.pp) + " does not divide the " +
           std::to_string(ranks) + " ranks";
  l.dp = pins.dp.value_or(ranks / (l.ep * l.tp * l.pp));
  if (l.ranks() != ranks)
    return head + "dp x " + ep + "tp x pp = " + std::to_string(l.ranks()) + ", not the " + std::to_string(ranks) +
           " ranks (--ranks, or the cluster's devices)";
  const int64_t G = run.global_batch, replicas = l.data_parallel();
  const std::string dp = l.ep > 1 ? "dp x ep" : "dp";  // the ranks that split the sequences
  if (G % replicas != 0)
    return head + dp + " " + std::to_string(replicas) + " does not divide the " + std::to_string(G) +
           " sequences of a step (data.batch_size x data.grad_accum_steps)";
  if (pins.micro_batch && pins.accum && *pins.micro_batch * *pins.accum * replicas != G)
    return head + "b x m x " + dp + " = " + std::to_string(*pins.micro_batch * *pins.accum * replicas) + ", not the " +
           std::to_string(G) + " sequences of a step";
  const int64_t per_rank = G / replicas;
  if ((pins.micro_batch && per_rank % *pins.micro_batch != 0) || (pins.accum && per_rank % *pins.accum != 0))
    return head + "b x m must be the " + std::to_string(per_rank) + " sequences of each data-parallel rank's step";
  l.micro_batch = pins.micro_batch.value_or(pins.accum ? per_rank / *pins.accum : 1);
  l.accum = per_rank / l.micro_batch;
  l.virtual_stages = pins.virtual_stages.value_or(1);
  l.zero_stage = pins.zero_stage.value_or(0);
  l.checkpointing = pins.checkpointing.value_or("none");
  l.sequence_parallel = pins.sequence_parallel.value_or(false);
  l.nvme = pins.nvme.value_or(false);
  l.offload = pins.offload.value_or(l.nvme);
  if (l.virtual_stages > 1 && l.accum % l.pp != 0)
    return head + "the interleaved schedule needs micro-batches per step (m " + std::to_string(l.accum) +
           ") divisible by pp " + std::to_string(l.pp);
  std::string why;
  if (!trainer_accepts(run.model, run.seq_len, l, &why)) return head + "the trainer refuses " + l.str() + ": " + why;
  if (!fine_tuning_accepts(run, l, &why)) return head + l.str() + " cannot fine-tune this run: " + why;
  return head + "none of its completions is one the trainer runs";
}

}  // namespace trident::planner
