#include "commands.h"
#include "cli_checks.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string_view>

#include <nlohmann/json.hpp>

#include "adapters/lora.h"
#include "adapters/peft_files.h"
#include "checkpoint/atomic_file.h"
#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/env.h"
#include "comm/mpi_communicator.h"
#include "config/config_tree.h"
#include "core/factory.h"
#include "core/options.h"
#include "core/parallel.h"
#include "data/chat_template.h"
#include "data/decode_continuation.h"
#include "data/prepare.h"
#include "kernels/cpu/gemm_engine.h"
#include "kernels/cpu/gemm_rates.h"
#include "kernels/cpu/onednn_gemm.h"
#include "infer/engine.h"
#include "loading/model_source.h"
#include "loading/quantized_dir.h"
#include "models/generate.h"
#include "models/registry.h"
#include "train/hf_model_dir.h"
#include "train/stop_request.h"
#include "train/tokenizer_factory.h"
#include "train/trainer.h"

namespace trident::cli {

using loading::load_model;
using loading::load_tokenizer;
using loading::resolve_checkpoint;
using loading::resolve_model_source;
using loading::checkpoint_config;

Status load_config(config::ConfigTree& tree, const std::string& file, const std::vector<std::string>& overrides) {
  if (!file.empty()) {
    Status s = tree.load_toml_file(file);
    if (!s.is_ok()) return s;
  }
  std::vector<std::string> assignments;
  for (const std::string& arg : overrides) {
    if (!arg.starts_with("--"))
      return Status::invalid("unexpected argument '" + arg + "' (overrides look like --section.key=value)");
    assignments.push_back(arg.substr(2));
  }
  return tree.apply_overrides(assignments, "command line");  // model.arch before the keys it chooses
}

std::filesystem::path resolved_path(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec) p = fs::absolute(path, ec).lexically_normal();
  fs::path out;
  for (const fs::path& part : p)
    if (!part.empty()) out /= part;  // "dir/" ends in an empty part
  return out;
}

bool is_within(const std::filesystem::path& inner, const std::filesystem::path& outer) {
  auto it = inner.begin();
  for (const std::filesystem::path& part : outer) {
    if (it == inner.end() || *it != part) return false;
    ++it;
  }
  return true;
}

namespace {


}  // namespace

CLI::App* add_prepare(CLI::App& app, PrepareArgs& a) {
  CLI::App* c = app.add_subcommand("prepare", "Tokenize text files into train.bin / val.bin (uint16 ids; uint32 past 65,536)");
  c->add_option("files", a.inputs, "text files (UTF-8); each is one document")->required()->check(CLI::ExistingFile);
  c->add_option("--out", a.out_dir, "output directory")->required();
  c->add_option("--tokenizer", a.tokenizer, train::kTokenizerHelp);
  c->add_option("--vocab", a.vocab_dir, "the named tokenizer's files (gpt2: the vocab.json + merges.txt directory)");
  c->add_option("--val-fraction", a.val_fraction,
                 "share of tokens (from the end) for validation; 0: no validation split")
      ->check(number_in(0.0, true, 0.9, "[0, 0.9]"));
  c->add_option("--chat-template", a.chat_template,
                "how .jsonl chat examples ({\"messages\": [...]}) are rendered: llama3, chatml, plain, or auto (the "
                "template of the --tokenizer model directory's tokenizer_config.json, else plain)");
  c->footer(
      ".jsonl inputs are instruction or chat data, one example per line: {\"prompt\", \"completion\"} or "
      "{\"messages\": [{\"role\", \"content\"}, ...]}; only the completion and the assistant's turns are trained on "
      "(a loss mask, train.mask / val.mask beside the token files).");
  return c;
}

Status run_prepare(const PrepareArgs& a) {
  // An input that is the train.bin or val.bin being written (or removed) would be lost.
  for (const char* name : {"train.bin", "val.bin"}) {
    const std::filesystem::path written = resolved_path(a.out_dir) / name;
    for (const std::string& f : a.inputs)
      if (resolved_path(f) == written)
        return Status::invalid("prepare: the input file '" + f + "' is the " + name + " of --out '" + a.out_dir +
                               "' (" + written.string() +
                               "), which prepare writes over or removes: choose another --out");
  }
  auto tok = train::make_tokenizer(a.tokenizer, a.vocab_dir);
  if (!tok.is_ok()) return tok.status();
  data::PrepareOptions opt;
  for (const std::string& f : a.inputs) opt.inputs.emplace_back(f);
  opt.out_dir = a.out_dir;
  opt.val_fraction = a.val_fraction;
  opt.chat_template = a.chat_template;
  if (a.chat_template == "auto") {
    auto found = data::chat_template_of_model_dir(a.tokenizer);
    if (!found.is_ok()) return found.status();
    opt.chat_template = found.value().value_or("plain");
  } else if (const auto& names = data::chat_template_names();
             std::find(names.begin(), names.end(), a.chat_template) == names.end()) {
    return Status::invalid("prepare: --chat-template '" + a.chat_template +
                           "' is not a template trident ships (llama3, chatml, plain, or auto)");
  }
  auto r = data::prepare_token_files(*tok.value(), opt);
  if (!r.is_ok()) return r.status();
  const data::PrepareResult& res = r.value();
  std::printf("prepared %lld documents (%lld bytes) with %s: %lld train tokens -> %s, ",
              static_cast<long long>(res.documents), static_cast<long long>(res.input_bytes),
              tok.value()->name().c_str(), static_cast<long long>(res.train_tokens), res.train_path.c_str());
  if (res.val_path.empty()) {
    std::printf("no validation split (--val-fraction 0%s)\n",
                res.removed_old_val ? "; removed the older val.bin there" : "");
  } else {
    std::printf("%lld val tokens -> %s\n", static_cast<long long>(res.val_tokens), res.val_path.c_str());
  }
  if (res.masks)
    std::printf("instruction data (chat template %s): %lld examples, %lld of %lld tokens trained on (loss masks %s)\n",
                opt.chat_template.c_str(), static_cast<long long>(res.documents),
                static_cast<long long>(res.trained_tokens), static_cast<long long>(res.train_tokens + res.val_tokens),
                (res.val_path.empty() ? "train.mask" : "train.mask, val.mask"));
  return Status::ok();
}

CLI::App* add_train(CLI::App& app, TrainArgs& a) {
  CLI::App* c = app.add_subcommand("train", "Train a model (model.arch) from a config file and --section.key=value overrides");
  c->add_option("--config", a.config_file, "TOML config file")->check(CLI::ExistingFile);
  c->add_flag("--print-config", a.print_config, "print the resolved config and exit");
  c->add_flag("--help-config", a.help_config, "list every config key with its default and doc, and exit");
  c->allow_extras();
  c->footer(
      "SIGTERM or Ctrl-C: finishes the step, writes a checkpoint and exits with status 75 (the same command resumes);\n"
      "a second Ctrl-C exits at once (130). --train.max_runtime=4h does the same on time.");
  return c;
}

Status run_train(const TrainArgs& a, const std::vector<std::string>& overrides, int* exit_code) {
  train::install_stop_handlers();  // main() did already; once more costs nothing
  train::TrainConfig cfg;
  cfg.alerts = {monitor::AlertRule{}};  // the default plateau rule (monitor/alert_rule.h)
  config::ConfigTree tree;
  cfg.bind(tree);
  if (a.help_config) {
    std::printf("%s", tree.help().c_str());
    return Status::ok();
  }
  // Errors of the config (file, keys, values) exit kExitConfigError (Note [Exit statuses]).
  *exit_code = train::kExitConfigError;
  if (Status s = load_config(tree, a.config_file, overrides); !s.is_ok()) return s;
  // A Hugging Face directory in train.init_from gives the architecture: printed as it will run.
  if (Status s = train::resolve_init_from(cfg); !s.is_ok()) return s;
  try {
    cfg.validate();
  } catch (const Error& e) {
    return Status::invalid(e.what());
  }
  // The world communicator, once: each MpiRuntime::world() is a new communicator with a
  // number of its own (Note [Reading a flight record]); the trainer's must be the first, 0.
  std::shared_ptr<comm::Communicator> world;
  if (comm::MpiRuntime::launched_by_mpirun()) world = comm::MpiRuntime::world();
  const int ranks = world ? world->size() : 1;
  if (cfg.parallel.auto_layout) {  // the planner's best layout for the ranks this job has (apps/plan.cc)
    if (Status s = apply_auto_layout(cfg, ranks, comm::MpiRuntime::launcher_rank() == 0); !s.is_ok()) return s;
  }
  try {  // a layout that does not fit these ranks is the config's error (Note [Restarts with fewer ranks])
    train::Trainer::check_layout(cfg, ranks);
  } catch (const Error& e) {
    return Status::invalid(e.message());
  }
  *exit_code = 0;
  cfg.kernels = cfg.kernels.resolved(cfg.uses_bf16_gemms());  // the printed config names the engines (Note [GEMM engines])
  const bool rank0 = comm::MpiRuntime::launcher_rank() == 0;
  if (rank0) std::printf("# resolved config\n%s", tree.to_toml().c_str());
  if (const std::string env = kernels::cpu::KernelsOptions::environment_overrides(); rank0 && !env.empty())
    std::fprintf(stderr, "kernels: the environment overrides the config: %s\n", env.c_str());
  if (a.print_config) return Status::ok();
  std::fflush(stdout);
  auto trainer = train::Trainer::create(cfg, world);
  if (!trainer.is_ok()) return trainer.status();
  train::Trainer& t = *trainer.value();
  if (rank0) {
    const int64_t trainable = t.placements().trainable_numel(), all = t.num_model_parameters();
    const std::string trains =
        trainable == all ? "" : " (" + std::to_string(trainable) + " trainable" +
                                    (t.config().lora.enabled() ? ": LoRA r = " + std::to_string(t.config().lora.r) +
                                                                     ", the base frozen)"
                                                               : ")");
    std::string stored;
    if (const auto& q = t.quantized_base(); q && q->params() > 0) {
      char text[160];
      std::snprintf(text, sizeof text, "; %lld base weights in NF4, %.1f MiB (%.3f bytes each)",
                    static_cast<long long>(q->params()), static_cast<double>(q->bytes()) / (1 << 20),
                    static_cast<double>(q->bytes()) / static_cast<double>(q->params()));
      stored = text;
    }
    std::fprintf(stderr, "model: %lld parameters%s%s; %lld tokens per step; %d rank(s); starting at step %lld of %lld\n",
                 static_cast<long long>(all), trains.c_str(), stored.c_str(), static_cast<long long>(cfg.tokens_per_step()),
                 world ? world->size() : 1, static_cast<long long>(t.step()), static_cast<long long>(cfg.train.steps));
    if (cfg.train.device == "cpu") {
      namespace k = kernels::cpu;
      const k::GemmEngines e = cfg.kernels.engines(cfg.uses_bf16_gemms());
      std::fprintf(stderr, "kernels: f32 GEMM %s, bf16 GEMM %s (oneDNN ISA %s; [kernels] f32_gemm / bf16_gemm choose)\n",
                   k::gemm_engine_name(k::GemmType::kF32, e.f32), k::gemm_engine_name(k::GemmType::kBF16, e.bf16),
                   k::onednn_cpu_isa().c_str());
      // More threads than the CPUs the rank may use share them: mpirun binds a rank to one core
      // unless told not to, which made a 2-thread run 1.9x slower here (4 steps of a 168M LLaMA).
      if (const int cpus = cpus_available(); cpus > 0 && num_threads() > cpus)
        std::fprintf(stderr,
                     "threads: %d threads but this rank may run on %d CPU(s) (its affinity: mpirun binds each rank "
                     "to a core unless given --bind-to none, which trident launch passes): they share them\n",
                     num_threads(), cpus);
    }
  }
  Status s = t.run();
  if (!s.is_ok() && t.diverged()) *exit_code = train::kExitDiverged;  // Note [Exit statuses]
  if (!s.is_ok() || t.stop_reason().empty()) return s;
  if (t.stopped_by_rule()) {  // running the same command again would stop again: not 75
    if (rank0)
      std::fprintf(stderr,
                   "stopped after step %lld by an alert rule (%s); exit status %d: the checkpoint in %s resumes it, "
                   "but the rule decided the run should not go on as it is (change the config or the rule first)\n",
                   static_cast<long long>(t.step()), t.stop_reason().c_str(), train::kExitStoppedByRule,
                   cfg.train.out_dir.c_str());
    *exit_code = train::kExitStoppedByRule;
    return s;
  }
  if (rank0)
    std::fprintf(stderr, "stopped early after step %lld (%s) with a checkpoint in %s; exit status %d: %s\n",
                 static_cast<long long>(t.step()), t.stop_reason().c_str(), cfg.train.out_dir.c_str(),
                 train::kExitStoppedEarly,
                 cfg.train.resume ? "run the same command again to resume"
                                  : "train.resume is false here: run again with --train.resume=true to continue");
  *exit_code = train::kExitStoppedEarly;
  return s;
}

CLI::App* add_gemm_rates(CLI::App& app, GemmRatesArgs& a) {
  CLI::App* c = app.add_subcommand(
      "gemm-rates", "Measure this CPU's GEMM rates per engine and dtype at the model's shapes (the MFU ceilings)");
  c->add_option("--config", a.config_file, "TOML training config (its [model] and data.batch_size, data.seq_len)")
      ->check(CLI::ExistingFile);
  c->add_option("--dtype", a.dtype, "dtypes to measure")->check(CLI::IsMember({"all", "f32", "bf16"}));
  c->add_option("--seconds-per-shape", a.seconds_per_shape, "time per shape and engine, after a warm-up call")
      ->check(number_in(0.0, true, 10.0, "[0, 10]"));
  c->add_flag("--json", a.json, "print JSON instead of a table");
  c->allow_extras();
  c->footer("Takes the training config's --section.key=value overrides, e.g. --model.n_layer=6 --data.seq_len=512.");
  return c;
}

Status run_gemm_rates(const GemmRatesArgs& a, const std::vector<std::string>& overrides) {
  namespace k = kernels::cpu;
  train::TrainConfig cfg;
  config::ConfigTree tree;
  cfg.bind(tree);
  if (Status s = load_config(tree, a.config_file, overrides); !s.is_ok()) return s;
  cfg.validate();
  if (cfg.train.threads > 0) set_num_threads(static_cast<int>(cfg.train.threads));
  std::vector<k::GemmType> dtypes;
  if (a.dtype != "bf16") dtypes.push_back(k::GemmType::kF32);
  if (a.dtype != "f32") dtypes.push_back(k::GemmType::kBF16);
  k::GemmRateOptions options;
  options.seconds_per_shape = a.seconds_per_shape;
  const int64_t B = cfg.data.batch_size, T = cfg.data.seq_len;
  const bool bf16 = a.dtype != "f32";
  const k::KernelsOptions chosen = cfg.kernels.resolved(bf16);
  chosen.apply(bf16);  // widened-f32 runs on the configured f32 engine
  const k::GemmRates rates = k::measure_gemm_rates(models::model_family(cfg.model.arch).gemm_shapes(cfg.model, B, T), dtypes, options);
  if (a.json) {
    nlohmann::ordered_json out = {
        {"model", {{"arch", cfg.model.arch}, {"n_layer", cfg.model.n_layer}, {"n_embd", cfg.model.n_embd},
                   {"vocab_size", cfg.model.vocab_size}}},
        {"B", B}, {"T", T}, {"threads", rates.threads}, {"cpu_isa", k::onednn_cpu_isa()}, {"seconds", rates.seconds},
        {"kernels", {{"f32_gemm", chosen.f32_gemm}, {"bf16_gemm", chosen.bf16_gemm}}},
        {"gemm_rates", train::gemm_rates_json(rates)}};
    for (const k::GemmType t : dtypes) out["gemm_ceiling_gflops"][k::gemm_type_name(t)] = rates.ceiling_gflops(t);
    std::printf("%s\n", out.dump(2).c_str());
    return Status::ok();
  }
  std::printf("GEMM rates at %s L=%lld C=%lld V=%lld, B=%lld T=%lld: %zu shapes, %d threads, oneDNN ISA %s, "
              "measured in %.1f s\n%s",
              cfg.model.arch.c_str(), static_cast<long long>(cfg.model.n_layer), static_cast<long long>(cfg.model.n_embd),
              static_cast<long long>(cfg.model.vocab_size), static_cast<long long>(B), static_cast<long long>(T),
              rates.shapes.size(), rates.threads, k::onednn_cpu_isa().c_str(), rates.seconds,
              train::gemm_rates_table(rates).c_str());
  std::printf("[kernels] here: f32_gemm = \"%s\", bf16_gemm = \"%s\" (Note [GEMM engines])\n", chosen.f32_gemm.c_str(),
              chosen.bf16_gemm.c_str());
  return Status::ok();
}

CLI::App* add_sample(CLI::App& app, SampleArgs& a) {
  CLI::App* c = app.add_subcommand("sample", "Generate text from a checkpoint or a Hugging Face model directory");
  c->add_option("--checkpoint", a.checkpoint,
                "checkpoint directory, a run directory (its latest), or a Hugging Face model directory")
      ->required();
  c->add_option("--prompt", a.prompt, "text to continue");
  c->add_option("--tokens", a.tokens, "number of tokens to generate")->check(CLI::Range(1, 100000));
  c->add_option("--temperature", a.temperature, "sampling temperature (0: greedy)")
      ->check(number_in(0.0, true, 100.0, "[0, 100]"));
  c->add_option("--top-k", a.top_k, "sample from the k most likely tokens (0: all)")->check(kNonNegative);
  c->add_option("--seed", a.seed, "sampling seed")->check(kNonNegative);
  c->add_option("--tokenizer", a.tokenizer,
                std::string(train::kTokenizerHelp) +
                " (default: the checkpoint config's data.tokenizer; a model directory's own tokenizer files)");
  c->add_option("--vocab", a.vocab_dir, "the tokenizer's files (default: the checkpoint config's data.vocab_dir)");
  c->add_option("--adapter", a.adapter,
                "a PEFT LoRA adapter directory (adapter_config.json, adapter_model.safetensors) applied to the model");
  return c;
}

Status run_sample(const SampleArgs& a) {
  auto src = resolve_model_source(a.checkpoint);
  if (!src.is_ok()) return src.status();
  const train::TrainConfig& cfg = src.value().cfg;
  auto tok = load_tokenizer(src.value(), a.tokenizer, a.vocab_dir);
  if (!tok.is_ok()) return tok.status();
  // A model's vocabulary may be padded past its tokenizer's (nanoGPT's 50304 for GPT-2's 50257,
  // Qwen2's 151936 for 151665), never by a thousand ids: a tokenizer that much smaller is
  // probably not the model's, and decoding fails at the first id it lacks. A warning, not an
  // error: a model trained on bytes with a larger vocab_size samples fine.
  if (constexpr int64_t kMaxVocabPadding = 1024; tok.value()->vocab_size() + kMaxVocabPadding <= cfg.model.vocab_size)
    std::fprintf(stderr,
                 "warning: the tokenizer %s has %lld ids, the model's vocab_size is %lld: if it is not the model's "
                 "tokenizer, decoding fails at the first id past it (name the model's with --tokenizer)\n",
                 tok.value()->name().c_str(), static_cast<long long>(tok.value()->vocab_size()),
                 static_cast<long long>(cfg.model.vocab_size));
  std::vector<std::string> quantized;  // their memory is released: nothing to read
  auto model = load_model(src.value(), a.adapter, &quantized);
  if (!model.is_ok()) return model.status();
  // Sampling from NaN weights prints noise (or one id forever): say which weight is bad.
  for (const nn::NamedTensor& p : model.value()->named_parameters())
    if (std::find(quantized.begin(), quantized.end(), p.first) == quantized.end())
      for (float v : to_vector<float>(p.second))
      if (!std::isfinite(v))
        return Status::invalid("sample: the weights of " + src.value().dir + " are not finite ('" + p.first +
                               "' holds " + std::to_string(v) + "): nothing to sample from; use an earlier checkpoint");
  std::vector<int64_t> prompt;
  for (data::TokenId id : tok.value()->encode(a.prompt, /*allow_special=*/true)) prompt.push_back(id);
  if (prompt.empty()) {
    const std::optional<data::TokenId> eot = tok.value()->eot_id();
    prompt.push_back(eot ? *eot : '\n');
  }
  // With a KV cache while the text fits the model's context (infer/engine.h); past it, each
  // token from the last block_size tokens, recomputed (nanoGPT's crop).
  std::vector<int64_t> out;
  model.value()->eval();
  if (static_cast<int64_t>(prompt.size()) + a.tokens <= cfg.model.block_size + 1) {
    infer::GenerationRequest request;
    request.prompt = prompt;
    request.max_tokens = a.tokens;
    request.sampling.temperature = a.temperature;
    request.sampling.top_k = a.top_k;
    request.sampling.seed = static_cast<uint64_t>(a.seed);
    infer::Engine engine(*model.value(), {.max_batch = 1, .capacity = cfg.model.block_size});
    out = engine.generate({request})[0].tokens;
  } else {
    models::SampleOptions opt{a.tokens, a.temperature, a.top_k, static_cast<uint64_t>(a.seed)};
    out = models::generate(*model.value(), prompt, opt);
  }
  std::vector<data::TokenId> ids(out.begin(), out.end()), context(prompt.begin(), prompt.end());
  std::printf("%s%s\n", a.prompt.c_str(), data::decode_continuation(*tok.value(), context, ids).c_str());
  return Status::ok();
}

CLI::App* add_eval(CLI::App& app, EvalArgs& a) {
  CLI::App* c = app.add_subcommand("eval", "Validation loss and perplexity of a checkpoint or a Hugging Face model directory");
  c->add_option("--checkpoint", a.checkpoint,
                "checkpoint directory, a run directory (its latest), or a Hugging Face model directory")
      ->required();
  c->add_option("--batches", a.batches, "validation batches (default: the config's train.eval_batches)")
      ->check(kPositive);
  c->add_option("--val-file", a.val_file,
                "token file to evaluate (default: the checkpoint config's data.val_file; required for a model directory)");
  c->add_option("--batch-size", a.batch_size, "sequences per batch (default: the checkpoint config's data.batch_size)")
      ->check(kPositive);
  c->add_option("--seq-len", a.seq_len, "tokens per sequence, at most model.block_size (default: data.seq_len)")
      ->check(kPositive);
  c->add_option("--adapter", a.adapter,
                "a PEFT LoRA adapter directory (adapter_config.json, adapter_model.safetensors) applied to the model");
  return c;
}

Status run_eval(const EvalArgs& a) {
  auto src = resolve_model_source(a.checkpoint);
  if (!src.is_ok()) return src.status();
  train::TrainConfig cfg = src.value().cfg;
  if (a.batches > 0) cfg.train.eval_batches = a.batches;
  if (a.batch_size > 0) cfg.data.batch_size = a.batch_size;
  if (a.seq_len > 0) cfg.data.seq_len = a.seq_len;
  cfg.data.grad_accum_steps = 1;  // eval takes no optimizer step
  if (!a.val_file.empty()) cfg.data.val_file = a.val_file;
  if (src.value().hf && a.val_file.empty())
    return Status::invalid("eval of the model directory " + src.value().dir +
                           " needs --val-file FILE (a token file from trident prepare, with the model's tokenizer)");
  if (!a.val_file.empty() && !std::filesystem::exists(a.val_file))
    return Status::invalid("eval: --val-file '" + a.val_file + "' does not exist (a token file from trident prepare)");
  if (a.seq_len > cfg.model.block_size)
    return Status::invalid("eval: --seq-len " + std::to_string(a.seq_len) + " exceeds the model's block_size " +
                           std::to_string(cfg.model.block_size) + " (allowed: 1 to " +
                           std::to_string(cfg.model.block_size) + ")");
  // Checked here, naming the flags, before TrainConfig::validate names the config keys they set.
  if (int64_t tokens = 0; __builtin_mul_overflow(cfg.data.batch_size, cfg.data.seq_len, &tokens) ||
                          tokens > (int64_t{1} << 53)) {
    const std::string from = src.value().hf ? "the default " : "the checkpoint's ";
    const std::string b = a.batch_size > 0 ? "--batch-size " : from + "data.batch_size ";
    const std::string t = a.seq_len > 0 ? "--seq-len " : from + "data.seq_len ";
    return Status::invalid("eval: " + b + std::to_string(cfg.data.batch_size) + " x " + t +
                           std::to_string(cfg.data.seq_len) + " is too large: at most 2^53 tokens per batch");
  }
  if (cfg.data.val_file.empty() || !std::filesystem::exists(cfg.data.val_file))
    return Status::invalid("eval needs validation tokens: the checkpoint's config has data.val_file = \"" +
                           cfg.data.val_file + "\"" + (cfg.data.val_file.empty() ? "" : ", which does not exist") +
                           "; pass --val-file FILE (a token file from trident prepare)");
  cfg.data.train_file = cfg.data.val_file;  // eval reads no training data
  cfg.train.resume = false;
  cfg.parallel = {};  // one process: the checkpoint loads under any layout it was saved from
  cfg.kernels = {};   // this CPU's engines (the checkpoint's may not run here)
  if (src.value().hf) cfg.train.init_from = src.value().dir;  // the trainer loads the directory's weights
  // A LoRA run's config holds its adapters ([lora]); the directory it started from is not needed.
  cfg.train.init_adapter = a.adapter;
  if (!a.adapter.empty() && cfg.lora.enabled())
    return Status::invalid("eval --adapter " + a.adapter + ": the checkpoint " + src.value().dir +
                           " is a LoRA run's and carries its own adapters; apply another adapter to a base model");
  auto trainer = train::Trainer::create(cfg);
  if (!trainer.is_ok()) return trainer.status();
  if (src.value().quantized) {  // the trainer's model, with the directory's weights and quantized views
    if (!a.adapter.empty()) return Status::invalid("eval --adapter: not with a quantized directory (" + src.value().dir + ")");
    auto applied = loading::load_quantized_dir(src.value().dir, trainer.value()->model());
    if (!applied.is_ok()) return applied.status();
  } else if (!src.value().hf && a.adapter.empty()) {
    if (Status s = trainer.value()->load_checkpoint(src.value().dir); !s.is_ok()) return s;
  } else if (!src.value().hf) {  // the base from the checkpoint, the adapters as --adapter gave them
    auto reader = checkpoint::CheckpointReader::open(checkpoint::default_env(), src.value().dir);
    if (!reader.is_ok()) return reader.status();
    std::vector<nn::NamedTensor> base;
    for (const nn::NamedTensor& p : trainer.value()->model().named_parameters())
      if (!adapters::is_lora_parameter(p.first)) base.push_back(p);
    if (Status s = train::load_checkpoint_weights(base, reader.value()); !s.is_ok()) return s;
  }
  const double loss = trainer.value()->evaluate();
  // Valid JSON whatever the loss: a NaN or infinite one is null (JSON has no NaN), and then the
  // status is an error's, with a message.
  auto number = [](double v, int digits) {
    if (!std::isfinite(v)) return std::string("null");
    char b[64];
    std::snprintf(b, sizeof b, "%.*f", digits, v);
    return std::string(b);
  };
  std::printf("{\"checkpoint\": %s, \"val_loss\": %s, \"perplexity\": %s, \"batches\": %lld}\n",
              nlohmann::json(src.value().dir).dump().c_str(), number(loss, 6).c_str(), number(std::exp(loss), 4).c_str(),
              static_cast<long long>(cfg.train.eval_batches));
  if (!std::isfinite(loss))
    return Status::invalid("eval of " + src.value().dir + ": the validation loss is " + std::to_string(loss) +
                           " (the weights, or the model's output on this data, are not finite)");
  return Status::ok();
}

CLI::App* add_tokenize(CLI::App& app, TokenizeArgs& a) {
  CLI::App* c = app.add_subcommand("tokenize", "Print the token ids of a text as a JSON array");
  c->add_option("--tokenizer", a.tokenizer, train::kTokenizerHelp);
  c->add_option("--vocab", a.vocab_dir, "the named tokenizer's files (gpt2: the vocab.json + merges.txt directory)");
  auto* text = c->add_option("--text", a.text, "the text");
  auto* file = c->add_option("--file", a.file, "a file holding the text")->check(CLI::ExistingFile);
  text->excludes(file);
  c->add_flag("--allow-special", a.allow_special, "treat special tokens' texts (<|endoftext|>, <s>) as those tokens");
  return c;
}

Status run_tokenize(const TokenizeArgs& a) {
  auto tok = train::make_tokenizer(a.tokenizer, a.vocab_dir);
  if (!tok.is_ok()) return tok.status();
  std::string text = a.text;
  if (!a.file.empty()) {
    std::ifstream in(a.file, std::ios::binary);
    if (!in) return Status::io_error("cannot read '" + a.file + "'");
    std::ostringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  std::vector<data::TokenId> ids;
  try {
    ids = tok.value()->encode(text, a.allow_special);
  } catch (const Error& e) {
    return Status::invalid((a.file.empty() ? std::string("--text") : a.file) + ": " + e.message());
  }
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
  std::printf("%s]\n", out.c_str());
  return Status::ok();
}

Status check_command_names(CLI::App& app, int argc, char** argv) {
  std::vector<std::string> names;
  for (const CLI::App* c : app.get_subcommands([](CLI::App*) { return true; })) names.push_back(c->get_name());
  auto check = [&](const std::string& word, const std::string& where) {
    if (word.empty() || word[0] == '-' || std::find(names.begin(), names.end(), word) != names.end()) return Status::ok();
    std::string msg = where + "unknown command '" + word + "'";
    if (auto m = closest_match(word, names)) msg += " (did you mean '" + *m + "'?)";
    std::string all;
    for (const std::string& n : names) all += (all.empty() ? "" : ", ") + n;
    return Status::invalid(msg + "; commands: " + all);
  };
  if (argc < 2) return Status::ok();
  Status s = check(argv[1], "");
  if (!s.is_ok() || std::string_view(argv[1]) != "launch") return s;
  for (int i = 2; i + 1 < argc; ++i)
    if (std::string_view(argv[i]) == "--") return check(argv[i + 1], "launch: ");
  return Status::ok();
}

std::string error_prefix() {
  if (!comm::MpiRuntime::launched_by_mpirun()) return "error: ";
  return "error (rank " + std::to_string(comm::MpiRuntime::launcher_rank()) + "): ";
}

void exit_after_error(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  if (comm::MpiRuntime::launched_by_mpirun()) comm::MpiRuntime::abort(code);
  std::exit(code);
}

}  // namespace trident::cli
