#include "train/train_config.h"

#include "config/duration.h"

namespace trident::train {

const OptionTable<DataOptions>& DataOptions::table() {
  static const auto t =
      OptionTable<DataOptions>("data", "Token files, tokenizer and batching")
          .add("train_file", &DataOptions::train_file, "training tokens (nanoGPT's uint16 train.bin, or uint32 with trident's header past 65,536 ids)")
          .add("val_file", &DataOptions::val_file,
               "validation tokens (as train_file); empty, or a file that does not exist: training runs without evaluation")
          .add("tokenizer", &DataOptions::tokenizer,
               "tokenizer used to prepare the data: byte, gpt2, cl100k_base, o200k_base, or a tokenizer file or "
               "model directory (tokenizer.json, tokenizer.model, *.tiktoken)")
          .add("vocab_dir", &DataOptions::vocab_dir,
               "the tokenizer's files: GPT-2's directory (vocab.json + merges.txt), cl100k_base/o200k_base's .tiktoken "
               "file or its directory, or the file / model directory for llama3, tiktoken, hf, sentencepiece; empty: "
               "search the usual places")
          .add("batch_size", &DataOptions::batch_size, "sequences per micro-batch (B)", Range::at_least(1))
          .add("seq_len", &DataOptions::seq_len, "tokens per sequence (T); <= model.block_size", Range::at_least(1))
          .add("grad_accum_steps", &DataOptions::grad_accum_steps, "micro-batches per optimizer step",
               Range::at_least(1))
          .add("sampler", &DataOptions::sampler, "batch order", {"random", "sequential"})
          .add("seed", &DataOptions::seed, "random sampler seed", Range::non_negative())
          .add("document_masking", &DataOptions::document_masking,
               "documents end at the tokenizer's end-of-text token: attention stays inside each and positions restart")
          .add("end_of_document", &DataOptions::end_of_document,
               "with document_masking: the token id that ends a document (-1: the tokenizer's end-of-text token)",
               Range::at_least(-1));
  return t;
}

const OptionTable<TrainOptions>& TrainOptions::table() {
  static const auto t =
      OptionTable<TrainOptions>("train", "The training run")
          .add("steps", &TrainOptions::steps, "optimizer steps in the run", Range::at_least(1))
          .add("eval_interval", &TrainOptions::eval_interval, "evaluate every N steps (0: at the end only)",
               Range::non_negative())
          .add("eval_batches", &TrainOptions::eval_batches, "validation batches per evaluation", Range::at_least(1))
          .add("log_interval", &TrainOptions::log_interval, "log line every N steps when not on a terminal",
               Range::at_least(1))
          .add("checkpoint_interval", &TrainOptions::checkpoint_interval,
               "save a checkpoint every N steps (0: at the end only)", Range::non_negative())
          .add("checkpoint_keep", &TrainOptions::checkpoint_keep, "complete checkpoints to keep", Range::at_least(1))
          .add("out_dir", &TrainOptions::out_dir, "directory for checkpoints and metrics.jsonl")
          .add("init_from", &TrainOptions::init_from,
               "weights to start from: a safetensors file (the Hugging Face names of model.arch) or a Hugging Face "
               "model directory (its config.json gives the model)")
          .add("freeze", &TrainOptions::freeze,
               "parameters that do not train, as comma-separated name patterns ('*' matches any characters: "
               "\"wte.weight,h.0.*\"): no gradient, no optimizer state, no gradient reduction")
          .add("init_adapter", &TrainOptions::init_adapter,
               "a Hugging Face PEFT LoRA adapter directory (adapter_config.json, adapter_model.safetensors) to start "
               "the adapters from: its r, lora_alpha and target_modules define them ([lora] may leave r = 0)")
          .add("resume", &TrainOptions::resume, "continue from the latest checkpoint in out_dir, if one exists")
          .add("threads", &TrainOptions::threads, "CPU threads (0: all cores)",
               Range::between(0, 4096))  // 100000 made OpenMP start 100000 threads
          .add("device", &TrainOptions::device, "where the model trains (cuda: one GPU per rank, the collectives on NCCL)", {"cpu", "cuda"})
          .add("flush_denormals", &TrainOptions::flush_denormals,
               "flush subnormal floats to zero: much faster once softmaxes underflow, no effect on training")
          .add("max_runtime", &TrainOptions::max_runtime,
               "wall-clock budget: stop at the last step boundary that leaves room for a step, write a checkpoint "
               "and exit with status 75 (0: no budget)",
               StringCheck{config::kDurationForms,
                           [](const std::string& s) { return config::parse_duration(s).has_value(); }})
          .add("profile_step", &TrainOptions::profile_step,
               "profile optimizer step N (1-based; 0: none): print the per-op time table and write "
               "<out_dir>/profile_stepN.json",
               Range::non_negative())
          .add("mfu", &TrainOptions::mfu,
               "measure this CPU's GEMM rates at the model's shapes at start (a few seconds) and report each step's "
               "MFU against the fastest of the run's dtype (CPU only)");
  return t;
}

double TrainOptions::max_runtime_seconds() const {
  const std::optional<double> seconds = config::parse_duration(max_runtime);
  TRI_CHECK(seconds.has_value(), "train.max_runtime = \"", max_runtime, "\" is invalid: allowed: ", config::kDurationForms);
  return *seconds;
}

void TrainConfig::bind(config::ConfigTree& tree) {
  tree.bind(model);
  tree.bind(data);
  tree.bind(optim);
  tree.bind(lr_schedule);
  tree.bind(precision);
  tree.bind(parallel);
  tree.bind(train);
  tree.bind(lora);
  tree.bind(quantization);
  tree.bind(kernels);
  tree.bind(monitor);
  tree.bind_list(alerts);
}

void TrainConfig::validate() const {
  model.validate();
  lora.validate();
  TRI_CHECK(!lora.enabled() || train.freeze.empty(), "train.freeze = \"", train.freeze, "\" with lora.r = ", lora.r,
            ": LoRA freezes the whole base already (only the adapters train); leave train.freeze empty");
  // Note [Where a quantized base comes from]: ZeRO-3 keeps frozen parameters in its flat
  // buffers, gathered per layer, which a quantized weight would have to replace.
  TRI_CHECK(!quantization.enabled() || parallel.zero_stage < 3, "quantization.base = \"", quantization.base,
            "\" with parallel.zero_stage = ", parallel.zero_stage,
            ": ZeRO-3 shards the frozen base, which NF4 stores whole on each rank (0.5 bytes a weight); use zero_stage <= 2");
  for (const monitor::AlertRule& rule : alerts) {
    rule.validate();
    TRI_CHECK(!rule.has_action("rollback_and_skip") || train.checkpoint_interval > 0, "[[alerts]] '", rule.name,
              "': rollback_and_skip restores a checkpoint, but train.checkpoint_interval = ",
              train.checkpoint_interval, " writes none during the run: set it > 0");
  }
  kernels.validate(uses_bf16_gemms());
  TRI_CHECK(data.end_of_document < model.vocab_size, "data.end_of_document = ", data.end_of_document,
            " is not a token id of model.vocab_size = ", model.vocab_size, " (-1: the tokenizer's end-of-text token)");
  TRI_CHECK(data.end_of_document < 0 || data.document_masking, "data.end_of_document = ", data.end_of_document,
            " ends documents only with data.document_masking = true");
  TRI_CHECK(data.seq_len <= model.block_size, "data.seq_len (", data.seq_len,
            ") must not exceed model.block_size (", model.block_size, ")");
  // Tokens per optimizer step must be a number: B x T x accumulation past int64 wrapped into a
  // small (even zero) batch, and the sampler overran its buffer.
  int64_t tokens = 0;
  TRI_CHECK(!__builtin_mul_overflow(data.batch_size, data.seq_len, &tokens) &&
                !__builtin_mul_overflow(tokens, data.grad_accum_steps, &tokens) && tokens <= (int64_t{1} << 53),
            "data.batch_size (", data.batch_size, ") x data.seq_len (", data.seq_len, ") x data.grad_accum_steps (",
            data.grad_accum_steps, ") is too large: at most 2^53 tokens per optimizer step");
  TRI_CHECK(lr_schedule.min_lr <= optim.lr, "lr_schedule.min_lr (", lr_schedule.min_lr,
            ") must not exceed optim.lr (", optim.lr, ")");
  (void)train.max_runtime_seconds();  // checks the text (a struct filled in code skips the table's check)
  TRI_CHECK(train.profile_step >= 0, "train.profile_step = ", train.profile_step,
            " is invalid: it must be >= 0 (0: no profile)");
  // A step past the run's end is never profiled: an error now rather than a run that ends
  // without the profile it was asked for.
  TRI_CHECK(train.profile_step <= train.steps, "train.profile_step = ", train.profile_step,
            " is invalid: it is past train.steps (", train.steps, "), so that step never runs");
  TRI_CHECK(lr_schedule.decay_steps == 0 || lr_schedule.decay_steps > lr_schedule.warmup_steps,
            "lr_schedule.decay_steps (", lr_schedule.decay_steps, ") must be 0 or greater than warmup_steps (",
            lr_schedule.warmup_steps, ")");
}

}  // namespace trident::train
