// The trainer's LoRA: adapters added to the whole model before parallelization (so every
// strategy sees them as the only trainable parameters), started from a PEFT directory when
// train.init_adapter names one, and written as PEFT's files after every checkpoint; and QLoRA's
// base, quantized to NF4 after parallelization.
#include <set>

#include "adapters/lora.h"
#include "adapters/peft_files.h"
#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/env.h"
#include "core/allocator.h"
#include "core/copy.h"
#include "parallel/placement.h"
#include "train/trainer.h"

namespace trident::train {

Status Trainer::apply_adapters() {
  if (!cfg_.lora.enabled() && cfg_.train.init_adapter.empty()) return Status::ok();
  std::optional<adapters::PeftAdapter> adapter;
  adapters::LoraOptions options = cfg_.lora;
  std::optional<adapters::LoraTargets> targets;
  if (!cfg_.train.init_adapter.empty()) {
    auto read = adapters::read_peft_adapter(cfg_.train.init_adapter);
    if (!read.is_ok()) return read.status();
    adapter = std::move(read.value());
    auto resolved = adapters::lora_options_for(*adapter, cfg_.lora);
    if (!resolved.is_ok()) return resolved.status();
    options = resolved.value();
    targets = adapter->targets;
  }
  try {
    MemoryCategoryGuard params(MemoryCategory::kParameter);
    lora_layers_ = adapters::apply_lora(*model_, options, targets);
  } catch (const std::exception& e) {
    return Status::invalid(std::string(cfg_.train.init_adapter.empty() ? "[lora]: " : "train.init_adapter: ") + e.what());
  }
  if (adapter) {
    if (Status s = adapters::load_peft_weights(*model_, *adapter); !s.is_ok()) return s;
  }
  // The config the checkpoints save says what was applied, so that a checkpoint alone rebuilds
  // the adapters (sample, eval, export, a resume without the adapter directory): the file's
  // rank and alpha, and for a regular expression the layers it matched.
  if (targets && targets->regex) {
    options.target_modules.clear();
    for (const adapters::LoraLayerInfo& l : lora_layers_) options.target_modules += (options.target_modules.empty() ? "" : ",") + l.path;
  }
  cfg_.lora = options;
  lora_ = options;
  return Status::ok();
}

Status Trainer::quantize_base() {
  if (!cfg_.quantization.enabled()) return Status::ok();
  std::set<std::string> here;  // this rank's parameters (a pipeline stage holds its own)
  for (const parallel::ParamPlacement* row : par_.placements->on_stage(par_.stage())) here.insert(row->name);
  try {
    quantized_base_ = quantization::quantize_base(*model_, cfg_.quantization,
                                                  [&](const std::string& p) { return here.contains(p); });
  } catch (const std::exception& e) {
    return Status::invalid(std::string("[quantization]: ") + e.what());
  }
  return Status::ok();
}

Tensor Trainer::frozen_values(const std::string& name) const {
  if (quantized_base_ && quantized_base_->contains(name)) return quantized_base_->dequantized(name);
  return model_->parameter(name);
}

// Note [PEFT files at every checkpoint]
// After a checkpoint is committed, rank 0 reads the adapters back from it (whole, whatever the
// layout: ZeRO's flat shards and pipeline stages assembled by the reader) and writes
// <out_dir>/adapter/ (adapter_model.safetensors, adapter_config.json): what PEFT's
// from_pretrained loads, always the newest checkpoint's adapters. Each file is written to a
// temporary name and renamed; the weights before the config. The ranks agree on the outcome, so
// that a failure ends every rank.
Status Trainer::write_adapter_files() {
  if (!lora_) return Status::ok();
  Status s = Status::ok();
  if (is_rank0()) {
    s = [&]() -> Status {
      const std::string dir = checkpoint::join_path(cfg_.train.out_dir, checkpoint::step_checkpoint_name(step_));
      auto reader = checkpoint::CheckpointReader::open(checkpoint::default_env(), dir, {.verify_checksums = false});
      if (!reader.is_ok()) return reader.status();
      std::vector<checkpoint::NamedTensor> tensors;
      for (const auto& [name, p] : model_->named_parameters()) {
        if (!adapters::is_lora_parameter(name)) continue;
        auto t = reader.value().load_tensor(name);
        if (!t.is_ok()) return t.status();
        tensors.push_back({name, core::cast(t.value(), DType::kF32)});
      }
      const adapters::LoraOptions& written = *lora_;
      const std::string base = cfg_.train.init_from;
      return adapters::write_peft_adapter(checkpoint::join_path(cfg_.train.out_dir, "adapter"), cfg_.model,
                                          adapters::peft_config_json(cfg_.model, written, lora_layers_, base), tensors);
    }();
  }
  if (!all_ranks(s.is_ok()))
    return s.is_ok() ? Status::io_error("rank 0 could not write " + cfg_.train.out_dir + "/adapter") : s;
  return Status::ok();
}

}  // namespace trident::train
