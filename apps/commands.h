// The subcommands of the trident tool: argument structs, CLI11 registration, and the
// functions that run them. Each returns a Status; main() prints it.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "config/config_tree.h"
#include "core/status.h"
#include "train/train_config.h"

namespace trident::cli {

// Fills the config bound to `tree` from a TOML file (if given) and "--section.key=value"
// overrides, in that order.
Status load_config(config::ConfigTree& tree, const std::string& file, const std::vector<std::string>& overrides);

// `path` absolute, with its symlinks, "." and ".." resolved and no trailing slash (a tail that
// does not exist yet as written): two spellings of one place give one path.
std::filesystem::path resolved_path(const std::string& path);
// Whether `inner` is `outer` or a path under it (both from resolved_path): an output there
// would overwrite the input being read.
bool is_within(const std::filesystem::path& inner, const std::filesystem::path& outer);

struct PrepareArgs {
  std::vector<std::string> inputs;
  std::string out_dir;
  std::string tokenizer = "gpt2";
  std::string vocab_dir;
  double val_fraction = 0.1;
  std::string chat_template = "auto";  // .jsonl chat data: llama3, chatml, plain; auto: the model directory's, else plain
};
CLI::App* add_prepare(CLI::App& app, PrepareArgs& args);
Status run_prepare(const PrepareArgs& args);

struct TrainArgs {
  std::string config_file;
  bool print_config = false;
  bool help_config = false;
};
CLI::App* add_train(CLI::App& app, TrainArgs& args);
// `overrides`: the remaining "--section.key=value" arguments.
// Under mpirun, trains data-parallel over the job's ranks; rank 0 alone prints. SIGTERM,
// SIGINT or SIGUSR1 stop the run at a step boundary with a checkpoint, as train.max_runtime
// does: then `exit_code` is set to train::kExitStoppedEarly (75).
Status run_train(const TrainArgs& args, const std::vector<std::string>& overrides, int* exit_code);

// `trident gemm-rates`: this CPU's GEMM rates per engine and dtype at the model's shapes
// (kernels/cpu/gemm_rates.h), from a training config and its overrides; a table or JSON.
struct GemmRatesArgs {
  std::string config_file;
  std::string dtype = "all";  // "all", "f32" or "bf16"
  double seconds_per_shape = 0.02;
  bool json = false;
};
CLI::App* add_gemm_rates(CLI::App& app, GemmRatesArgs& args);
Status run_gemm_rates(const GemmRatesArgs& args, const std::vector<std::string>& overrides);

// The first word of the command line that should name one of `app`'s commands and names none
// (trident's own, and launch's after --): an error naming it, the closest command and all.
Status check_command_names(CLI::App& app, int argc, char** argv);
// "error: " or, in a job started by mpirun, "error (rank R): ".
std::string error_prefix();
// Exits with `code`; in an MPI job, ends every rank (no rank is left waiting on this one).
[[noreturn]] void exit_after_error(int code);

struct SampleArgs {
  std::string checkpoint;
  std::string prompt = "\n";
  int64_t tokens = 200;
  double temperature = 0.8;
  int64_t top_k = 200;
  int64_t seed = 1337;
  std::string tokenizer;  // empty: the checkpoint config's data.tokenizer, or a model directory's own files
  std::string vocab_dir;
  std::string adapter;    // a PEFT LoRA adapter directory applied to the model
};
CLI::App* add_sample(CLI::App& app, SampleArgs& args);
Status run_sample(const SampleArgs& args);

// `trident serve`: an OpenAI-compatible server over a model (serve/server.h).
struct ServeArgs {
  std::string checkpoint;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string model_name;     // empty: the checkpoint directory's name
  int64_t max_batch = 8;      // requests generated together
  int64_t context = 0;        // tokens per request, prompt included; 0: the model's block_size
  int64_t kv_cache_tokens = 0;  // the KV cache's pool shared by the batch; 0: every request's longest at once
  std::string chat_template;  // empty: the model directory's, else plain
  std::string tokenizer;
  std::string vocab_dir;
  std::string adapter;
  int64_t threads = 0;
  double response_deadline_s = 600;  // one answer (a stream too) must end within this
  int max_connections = 64;
  int64_t max_body_bytes = 1 << 20;
  std::string api_key;        // empty: none; else also read from TRIDENT_API_KEY
  int64_t max_queue = 256;
};
CLI::App* add_serve(CLI::App& app, ServeArgs& args);
Status run_serve(const ServeArgs& args);

struct EvalArgs {
  std::string checkpoint;
  // Not given (0; the flags take 1 and up): the checkpoint config's value.
  int64_t batches = 0;  // train.eval_batches
  std::string val_file; // empty: the checkpoint config's data.val_file (required for a model directory)
  int64_t batch_size = 0;  // data.batch_size (a model directory: the default)
  int64_t seq_len = 0;     // data.seq_len (a model directory: min(default, block_size))
  std::string adapter;     // a PEFT LoRA adapter directory applied to the model
};
CLI::App* add_eval(CLI::App& app, EvalArgs& args);
Status run_eval(const EvalArgs& args);

// `trident export` (export_command.cc): a checkpoint's model (whole or sharded) as a Hugging Face
// model directory, one safetensors file, or a GGUF file for llama.cpp.
struct ExportArgs {
  std::string checkpoint;
  std::string out;             // a directory (Hugging Face form), a .safetensors or a .gguf file
  std::string format;          // hf, safetensors, gguf; "" from --out
  std::string type = "f32";    // GGUF's weight type: f32, f16, q8_0, q4_0
  std::string tokenizer;       // GGUF's vocabulary: "" for the checkpoint config's data.tokenizer
  std::string vocab_dir;
  double max_shard_mb = 5000;  // the directory's shards (transformers' default: 5 GB)
  bool merge_lora = false;     // fold a LoRA run's adapters into the base weights
};
CLI::App* add_export(CLI::App& app, ExportArgs& args);
Status run_export(const ExportArgs& args);
// A quantized directory as GGUF, its blocks copied (export_quantized.cc): run_export's for one.
Status run_export_quantized(const ExportArgs& args);

// `trident quantize`: a model's linear layers in int8 / int4 (GGUF's Q8_0 / Q4_0) or NF4, as a
// quantized directory that sample, eval and serve read (loading/quantized_dir.h).
struct QuantizeArgs {
  std::string checkpoint;     // a checkpoint, run or Hugging Face model directory
  std::string scheme;         // quantization/scheme.h's names
  std::string out;
  // Layers kept in full precision; unset: the scheme's default_skip (Note [What stays in full precision]).
  std::optional<std::string> skip;
};
CLI::App* add_quantize(CLI::App& app, QuantizeArgs& args);
Status run_quantize(const QuantizeArgs& args);

struct TokenizeArgs {
  std::string tokenizer = "gpt2";
  std::string vocab_dir;
  std::string text;
  std::string file;
  bool allow_special = false;
};
CLI::App* add_tokenize(CLI::App& app, TokenizeArgs& args);
Status run_tokenize(const TokenizeArgs& args);

// `trident launch -n N [--hostfile F] -- train ...`: runs mpirun with the flags trident wants
// (--bind-to none for the ranks' OpenMP threads; --oversubscribe on one host; as root, the
// allow-run-as-root variables) on this same executable, and waits for it. SIGTERM or SIGINT
// to launch reach every rank as SIGUSR1 (a stop at the next step boundary, with a
// checkpoint); a second SIGINT ends the job at once. `exit_code`: mpirun's status (the last
// attempt's). --max-restarts: a failed job runs again, on the hosts that answer
// (Note [Restarts] in apps/restart_policy.h).
struct LaunchArgs {
  int ranks = 1;
  std::string hostfile;
  std::string mpirun = "mpirun";
  bool dry_run = false;
  int max_restarts = 0;             // 0: a failed job is not run again
  double restart_window_s = 0.0;    // count restarts over this many seconds (0: the whole launch)
  double restart_backoff_s = 2.0;   // the first restart's wait; doubles per restart in the window
  int min_ranks = 0;                // restart on fewer ranks, down to this (0: -n); needs a hostfile
  double host_check_timeout_s = 10.0;  // how long a host has to answer before a restart
  std::vector<std::string> command;  // everything after "--"
};
CLI::App* add_launch(CLI::App& app, LaunchArgs& args);
Status run_launch(const LaunchArgs& args, int* exit_code);

// `trident ctl URL status|pause|resume|checkpoint|stop`: run control of a training run's
// rank 0 server (monitor.port). POSTs send $TRIDENT_CONTROL_TOKEN or --token-file's token.
// Prints the server's JSON; a refusal (401, 409...) is an error naming the status.
struct CtlArgs {
  std::string url;
  std::string action;
  std::string token_file;
  std::string reason;
  int timeout_s = 10;
};
CLI::App* add_ctl(CLI::App& app, CtlArgs& args);
Status run_ctl(const CtlArgs& args);

// `trident report RUN_DIR [--out FILE]` (monitor/run_report.h).
struct ReportArgs {
  std::string run_dir;
  std::string out;
};
CLI::App* add_report(CLI::App& app, ReportArgs& args);
Status run_report(const ReportArgs& args);

// `trident plan [--config FILE] [--ranks N | --cluster FILE] [--json] [--top K] [--section.key=value ...]`:
// every layout of the run on the ranks, predicted memory and step time, ranked (planner/plan.h).
struct PlanArgs {
  std::string config_file;
  int64_t ranks = 0;         // 0: the cluster file's devices, or 1
  int64_t nodes = 0;         // 0: the cluster file's nodes
  std::string cluster_file;  // a cluster file (configs/clusters/), or `trident calibrate`'s
  bool json = false;
  int64_t top = 10;
  bool explain = false;      // the first layout's step by part (planner::time_breakdown)
  bool offload = false;      // also ZeRO-Offload layouts
  bool nvme = false;         // also the NVMe tier's (as a config naming it: offload_optimizer_device = "nvme")
  std::string layout;        // pinned axes, "dp8 tp4 pp2 ..." (planner/layout_pins.h)
  double tokens = 0;         // with price: time and cost to train on this many tokens
  double price_per_device_hour = 0;
  double comm_overlap = -1;  // < 0: the cluster file's device.comm_overlap
  std::string convention = "trident";  // whose conventions (planner/convention.h)
  std::string attention = "flash";     // the attention kernel: flash or unfused (Note [Unfused attention])
  std::string expert_load;             // a run's metrics.jsonl: its experts' routing (Note [Measured expert load])
};
CLI::App* add_plan(CLI::App& app, PlanArgs& args);
Status run_plan(const PlanArgs& args, const std::vector<std::string>& overrides);

// `trident calibrate [--config FILE] [--out FILE] [--section.key=value ...]` (under mpirun for
// the collectives): measures this machine and writes a cluster file (planner/calibrate.h).
struct CalibrateArgs {
  std::string config_file;
  std::string out = "calibration.toml";
};
CLI::App* add_calibrate(CLI::App& app, CalibrateArgs& args);
Status run_calibrate(const CalibrateArgs& args, const std::vector<std::string>& overrides);

// parallel.auto: replaces cfg's layout by the planner's best for `ranks` (parallel.auto_cluster's
// file, or this machine's defaults), printing why on rank 0 (`print`).
Status apply_auto_layout(train::TrainConfig& cfg, int ranks, bool print);

}  // namespace trident::cli
