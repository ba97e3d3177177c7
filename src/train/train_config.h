// The training configuration: one typed tree composed of each component's Options
// ([model], [data], [optim], [lr_schedule], [precision], [parallel], [train], [kernels],
// [monitor]).
// Every key has a default and a one-line doc in its component's table; config/ConfigTree
// parses TOML and overrides against them.
#pragma once

#include <cstdint>
#include <string>

#include "adapters/lora_options.h"
#include "config/config_tree.h"
#include "kernels/cpu/kernel_options.h"
#include "monitor/alert_rule.h"
#include "monitor/monitor_options.h"
#include "models/model_config.h"
#include "optim/adamw.h"
#include "optim/lr_schedule.h"
#include "optim/mixed_precision.h"
#include "parallel/parallel_options.h"
#include "quantization/quantization_options.h"

namespace trident::train {

struct DataOptions {
  std::string train_file = "data/train.bin";  // uint16 token file (nanoGPT format)
  std::string val_file = "data/val.bin";      // "" or a missing file: no evaluation
  std::string tokenizer = "gpt2";             // train/tokenizer_factory.h: a name or a tokenizer file/model dir
  std::string vocab_dir = "";                 // the named tokenizer's files (gpt2: vocab.json+merges.txt dir)
  int64_t batch_size = 8;                     // sequences per micro-batch (B)
  int64_t seq_len = 256;                      // tokens per sequence (T)
  int64_t grad_accum_steps = 1;               // micro-batches per optimizer step
  std::string sampler = "random";             // "random" or "sequential"
  int64_t seed = 1337;                        // random sampler seed
  // Every token after the tokenizer's end-of-text token starts a document: attention stays
  // inside documents and positions restart (ops/documents.h; Megatron's reset_attention_mask
  // and reset_position_ids). For packed instruction examples and pretraining text alike.
  bool document_masking = false;
  int64_t end_of_document = -1;  // the token that ends a document; -1: the tokenizer's end-of-text
  static const OptionTable<DataOptions>& table();
};

struct TrainOptions {
  int64_t steps = 1000;             // optimizer steps in the whole run
  int64_t eval_interval = 100;      // evaluate every this many steps (0: only at the end)
  int64_t eval_batches = 20;        // validation batches per evaluation
  int64_t log_interval = 10;        // plain log line every this many steps (no terminal)
  int64_t checkpoint_interval = 0;  // save every this many steps (0: only at the end)
  int64_t checkpoint_keep = 2;      // complete checkpoints kept in out_dir
  std::string out_dir = "out";      // checkpoints and metrics.jsonl
  std::string init_from = "";       // safetensors weights to start from (Hugging Face names of model.arch)
  std::string freeze = "";          // parameter-name patterns that do not train (nn/freeze.h)
  std::string init_adapter = "";    // a PEFT LoRA adapter directory to start the adapters from
  bool resume = true;               // continue from the latest checkpoint in out_dir if any
  int64_t threads = 0;              // CPU threads (0: all cores)
  std::string device = "cpu";       // where the model trains: "cpu" or "cuda"
  bool flush_denormals = true;      // flush subnormal floats to zero (Note [Denormals])
  std::string max_runtime = "0";    // wall-clock budget ("4h", "03:50:00"; "0": none), Note [Preemption]
  int64_t profile_step = 0;         // profile this optimizer step (1-based; 0: none), train/step_profile.h
  bool mfu = false;                 // measure the GEMM ceiling at start and report MFU (train/mfu.h; seconds)
  // train.max_runtime in seconds (0: none); validate() has checked it parses.
  double max_runtime_seconds() const;
  static const OptionTable<TrainOptions>& table();
};

struct TrainConfig {
  models::ModelConfig model;
  DataOptions data;
  optim::AdamWOptions optim;
  optim::LRScheduleOptions lr_schedule;
  optim::PrecisionOptions precision;
  parallel::ParallelOptions parallel;
  TrainOptions train;
  adapters::LoraOptions lora;
  quantization::QuantizationOptions quantization;
  kernels::cpu::KernelsOptions kernels;
  monitor::MonitorOptions monitor;
  // [[alerts]] (monitor/alert_rule.h). Empty here; `trident train` starts from the plateau
  // rule (a config file's [[alerts]] replace it, `alerts = []` removes it).
  std::vector<monitor::AlertRule> alerts;

  // Binds every section, in print order.
  void bind(config::ConfigTree& tree);
  // Cross-section checks (e.g. seq_len <= model.block_size), naming every value involved,
  // and that the [kernels] engines run on this CPU.
  void validate() const;
  // Tokens consumed per optimizer step.
  int64_t tokens_per_step() const { return data.batch_size * data.seq_len * data.grad_accum_steps; }
  // Whether the run multiplies bf16 matrices, so that kernels.bf16_gemm matters (kernel_options.h).
  bool uses_bf16_gemms() const { return precision.compute_dtype() == DType::kBF16; }
};

}  // namespace trident::train
