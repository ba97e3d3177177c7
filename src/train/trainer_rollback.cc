// rollback_and_skip: an alert's action that restores the newest checkpoint before a bad step
// and skips the batches that led to it (Trainer::rollback_and_skip).
#include <filesystem>

#include "core/check.h"
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
//      position moves from C x accum to S x accum, so step C+1 trains on the batch that step
//      S+1 would have drawn. The batches of the bad step and every one since C are never
//      trained on again; later batches are unchanged;
//   3. continues from step C (the lr schedule, dropout and loss scale as saved at C).
// So the rest of the run computes exactly what a run whose sampler never saw batches
// C+1 .. S computes: with the sequential sampler, a run on the training file with those
// batches' tokens cut out (tests/train/spike_rollback_test.py checks this bit for bit).
// Checkpoints after C belong to the discarded trajectory: rank 0 moves them to
// out_dir/rolled_back/ (kept for a person to look at; never resumed from). metrics.jsonl keeps
// the discarded steps' lines, then a {"rollback": ...} line, then steps C+1.. again: the last
// line of a step is the one that counts. A resumed run carries the skip in the checkpoint's
// sampler position.
StatusOr<std::string> Trainer::rollback_and_skip() {
  const int64_t bad = step_;
  checkpoint::Env* env = checkpoint::default_env();
  auto listing = checkpoint::list_step_checkpoints(env, cfg_.train.out_dir);
  if (!listing.is_ok()) return listing.status();
  std::optional<checkpoint::CheckpointListing> good;
  for (const checkpoint::CheckpointListing& c : listing.value())
    if (c.complete && c.step < bad) good = c;
  if (!good)
    return Status::invalid("rollback_and_skip after step " + std::to_string(bad) + ": no complete checkpoint at an " +
                           "earlier step in train.out_dir '" + cfg_.train.out_dir + "' (train.checkpoint_interval = " +
                           std::to_string(cfg_.train.checkpoint_interval) + "; set one that writes checkpoints " +
                           "before a spike can happen)");
  const std::string dir = (std::filesystem::path(cfg_.train.out_dir) / good->name).string();
  if (Status s = load_checkpoint(dir); !s.is_ok()) return s;
  TRI_ASSERT(step_ == good->step, "checkpoint ", dir, " says step ", step_, ", its name ", good->step);
  data::SamplerState st = train_sampler_->state();
  const int64_t skipped = (bad - step_) * cfg_.data.grad_accum_steps;
  st.position += skipped;
  train_sampler_->restore(st);
  // Every rank has read the listing and the checkpoint before rank 0 moves anything.
  if (comm_ && world_size() > 1) comm_->barrier();
  Status moved = Status::ok();
  if (is_rank0()) {
    const std::filesystem::path aside = std::filesystem::path(cfg_.train.out_dir) / "rolled_back";
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
  monitor_->on_rollback();
  return "rolled back from step " + std::to_string(bad) + " to the checkpoint of step " + std::to_string(step_) +
         ", skipping the " + std::to_string(skipped) + " batches of steps " + std::to_string(step_ + 1) + ".." +
         std::to_string(bad) + " (sampler positions " + std::to_string(st.position - skipped) + ".." +
         std::to_string(st.position - 1) + ")";
}

bool Trainer::tolerates_non_finite_loss() const {
  for (const monitor::AlertRule& r : cfg_.alerts)
    if (r.condition == "not_finite" && r.has_action("rollback_and_skip")) return true;
  return false;
}

}  // namespace trident::train
