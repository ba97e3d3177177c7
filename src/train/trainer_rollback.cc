// rollback_and_skip: an alert's action that restores the newest checkpoint before a bad step
// and skips the batches that led to it (Trainer::rollback_and_skip).
#include <filesystem>

#include "core/check.h"
#include "core/factory.h"
#include "train/trainer.h"

namespace trident::train {

// Note [Rollback and skip]
// What PaLM's authors did by hand around loss spikes (Chowdhery et al. 2022, section 5.1:
// restart from a checkpoint before the spike and skip the data batches around it). A rule
// with the action rollback_and_skip fires on rank 0 after step S (the bad step: its loss
// spiked or was not finite); its bit reaches every rank at the next step boundary with the
// other control bits (Note [Control at step boundaries]), where step is still S on every
// rank. Then every rank:
//   1. loads C, the newest complete checkpoint in train.out_dir at a step < S (the one at S,
//      if any, holds the bad step's update). None: the run ends with an error saying so;
//   2. skips the batches of steps C+1 .. S (grad_accum_steps batches each): the sampler's
//      position moves from the checkpoint's to the one step S reached (S x accum, or further
//      when an earlier rollback skipped batches since C), so step C+1 trains on the batch that
//      step S+1 would have drawn. The batches of the bad step and every one since C are never
//      trained on again; later batches are unchanged;
//   3. continues from step C (the lr schedule, dropout and loss scale as saved at C).
// So the rest of the run computes exactly what a run whose sampler never saw batches
// C+1 .. S computes: with the sequential sampler, a run on the training file with those
// batches' tokens cut out (tests/train/spike_rollback_test.py checks this bit for bit).
// Checkpoints after C belong to the discarded trajectory: rank 0 moves them to
// out_dir/rolled_back/from_step_S_to_C/ (kept for a person to look at; never resumed from),
// a folder of each rollback's own (`_2`, `_3`, ... when the same rollback happens again), so a
// second rollback over the same steps never meets the first one's folders. metrics.jsonl keeps
// the discarded steps' lines, then a {"rollback": ...} line, then steps C+1.. again: the last
// line of a step is the one that counts. A resumed run carries the skip in the checkpoint's
// sampler position. Which checkpoint: the newest before S unless the rule that fired has rolled
// back to it rollback_limit times already (Note [Rollback limits] in monitor/step_conditions.h);
// when none is left the run ends as diverged (exit 80, Note [Exit statuses]).
StatusOr<std::string> Trainer::rollback_and_skip() {
  const int64_t bad = step_;
  checkpoint::Env* env = checkpoint::default_env();
  auto listing = checkpoint::list_step_checkpoints(env, cfg_.train.out_dir);
  if (!listing.is_ok()) return listing.status();
  std::vector<int64_t> candidates;  // ascending, as listed
  for (const checkpoint::CheckpointListing& c : listing.value())
    if (c.complete && c.step < bad) candidates.push_back(c.step);
  if (candidates.empty())
    return Status::invalid("rollback_and_skip after step " + std::to_string(bad) + ": no complete checkpoint at an " +
                           "earlier step in train.out_dir '" + cfg_.train.out_dir + "' (train.checkpoint_interval = " +
                           std::to_string(cfg_.train.checkpoint_interval) + "; set one that writes checkpoints " +
                           "before a spike can happen)");
  // Rank 0's rules choose the checkpoint (Note [Rollback limits] in monitor/step_conditions.h);
  // -1: none is left, the run has diverged. Every rank learns the choice.
  std::string diverged_why;
  int64_t target = candidates.back();
  if (is_rank0()) target = monitor_->rollback_target(bad, candidates, &diverged_why).value_or(-1);
  if (comm_ && world_size() > 1) {
    Tensor t = from_vector<int64_t>({target}, {1});
    comm_->broadcast(t, 0);
    target = t.data_ptr<int64_t>()[0];
  }
  if (target < 0) {
    diverged_ = true;
    return Status::error(ErrorKind::kValue, is_rank0() ? diverged_why
                                                       : "rank 0's alert rules found the run diverged after step " +
                                                             std::to_string(bad) + " (its message says why)");
  }
  const std::string dir = (std::filesystem::path(cfg_.train.out_dir) / checkpoint::step_checkpoint_name(target)).string();
  // The skip reaches the position the bad step's sampler reached: after an earlier rollback
  // to the same checkpoint that is past S x accum, and starting from the checkpoint's own
  // position again would replay the batches that went bad the last time.
  const int64_t reached = train_sampler_->position();
  if (Status s = load_checkpoint(dir); !s.is_ok()) return s;
  saved_alert_state_ = nullptr;  // the live rules' state goes on (Note [Alert state in checkpoints])
  TRI_ASSERT(step_ == target, "checkpoint ", dir, " says step ", step_, ", its name ", target);
  data::SamplerState st = train_sampler_->state();
  const int64_t skipped = reached - st.position;
  TRI_ASSERT(skipped >= (bad - step_) * cfg_.data.grad_accum_steps, "rollback_and_skip: sampler at ", reached,
             " after step ", bad, ", checkpoint of step ", step_, " at ", st.position);
  st.position = reached;
  train_sampler_->restore(st);
  // Every rank has read the listing and the checkpoint before rank 0 moves anything.
  if (comm_ && world_size() > 1) comm_->barrier();
  Status moved = Status::ok();
  if (is_rank0()) {
    const std::string base = "from_step_" + std::to_string(bad) + "_to_" + std::to_string(step_);
    std::filesystem::path aside = std::filesystem::path(cfg_.train.out_dir) / "rolled_back" / base;
    for (int n = 2; std::filesystem::exists(aside); ++n)
      aside = std::filesystem::path(cfg_.train.out_dir) / "rolled_back" / (base + "_" + std::to_string(n));
    std::error_code ec;
    std::filesystem::create_directories(aside, ec);
    for (const checkpoint::CheckpointListing& c : listing.value()) {
      if (c.step <= step_ || ec) continue;
      std::filesystem::rename(std::filesystem::path(cfg_.train.out_dir) / c.name, aside / c.name, ec);
    }
    if (ec) moved = Status::io_error("rollback_and_skip: cannot move the checkpoints after step " +
                                     std::to_string(step_) + " to " + aside.string() + ": " + ec.message());
  }
  if (comm_ && world_size() > 1) comm_->barrier();
  if (!moved.is_ok()) return moved;
  last_checkpoint_step_ = step_;
  monitor_->on_rollback(bad, step_);
  const std::string further =
      step_ < candidates.back() ? " (further back than the newest, step " + std::to_string(candidates.back()) +
                                      ": rollback_limit reached there)"
                                : "";
  return "rolled back from step " + std::to_string(bad) + " to the checkpoint of step " + std::to_string(step_) +
         further + ", skipping the " + std::to_string(skipped) + " batches of steps " + std::to_string(step_ + 1) + ".." +
         std::to_string(bad) + " (sampler positions " + std::to_string(st.position - skipped) + ".." +
         std::to_string(st.position - 1) + ")";
}

bool Trainer::tolerates_non_finite_loss() const {
  for (const monitor::AlertRule& r : cfg_.alerts)
    if (r.condition == "not_finite" && (r.has_action("rollback_and_skip") || r.has_action("stop") || r.has_action("pause")))
      return true;
  return false;
}

}  // namespace trident::train
