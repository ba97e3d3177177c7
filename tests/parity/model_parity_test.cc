// Parity with PyTorch (issues #3 and #22): trident's trainer and an independent PyTorch model
// (gpt2_torch.py for GPT-2, llama_torch.py for the LLaMA family, next to this file; PyTorch +
// numpy only, no trident code) train the same
// model from the same safetensors init on the same token files with the sequential sampler,
// AdamW, the warmup/cosine schedule and global-norm clipping, in fp32, and must report the
// same per-step training losses within 1e-4 relative. The run's definition (sampler,
// schedule, step) is written out in the script's docstring.
//
// Each case: trident writes a random init of the case's family (its own init, seeded) to model.safetensors
// and a synthetic byte-level text with structure (so the loss falls) to train.bin/val.bin;
// trident's Trainer trains `steps` steps from it (init_from, resume = false); the script
// trains the same configuration and writes its losses as JSON; the test prints both columns
// and asserts per step: loss within 1e-4 relative, lr equal, grad norm within 1e-3 relative;
// and the validation losses within 1e-4 relative.
//
// Skips (with the reason) when /usr/bin/python3 (or python3) cannot import torch and numpy.
// The script is found next to this source file (__FILE__); TRIDENT_PARITY_PYTHON overrides
// the interpreter.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/env.h"
#include "checkpoint/safetensors.h"
#include "data/token_file.h"
#include "models/registry.h"
#include "train/trainer.h"

namespace trident::train {
namespace {

namespace fs = std::filesystem;

constexpr double kLossRtol = 1e-4;      // issue #3
constexpr double kGradNormRtol = 1e-3;  // loose: a norm of fp32 gradients summed in different orders

struct ParityCase {
  std::string name;
  int64_t n_layer, n_head, n_embd, block_size, vocab_size;
  int64_t batch_size, seq_len, grad_accum, steps;
  double lr, min_lr;
  int64_t warmup, decay_steps;  // decay_steps 0: the run's steps
  double beta1, beta2, eps, weight_decay, grad_clip;
  int64_t eval_interval, eval_batches;
  int64_t init_seed;
  // The family and, for "llama", its own keys (model_config.h; 0 kv heads: n_head).
  std::string arch = "gpt2";
  int64_t n_kv_heads = 0, intermediate_size = 0;
  double rope_theta = 10000.0;
  bool tie_word_embeddings = false, qkv_bias = false;
  double rope_scaling_factor = 0.0;  // Llama 3's; low/high freq factors 1 and 4
  int64_t rope_original_max_position = 8192;
  int64_t sliding_window = 0;  // Mistral's; 0: none
  // LoRA (issue #48): the script writes a PEFT adapter (peft_lora.py: A Kaiming-uniform, B
  // N(0, 0.02)) and both sides train only it, from the same file, the base frozen.
  int64_t lora_r = 0;
  double lora_alpha = 16.0;
  std::string lora_targets = "";
  bool lora_rslora = false;
  // A mixture of experts (issue #51): Mixtral's sparse MLP (Qwen2-MoE's with qkv_bias).
  int64_t num_experts = 0, top_k = 2, moe_intermediate = 0, shared_expert_intermediate = 0, sparse_step = 1;
  bool norm_topk_prob = true;
  double aux_loss_coef = 0.0, z_loss_coef = 0.0;
};

// `c` with a sparse MoE MLP of E experts.
ParityCase with_moe(ParityCase c, std::string name, int64_t experts, int64_t top_k, int64_t width, double aux_coef,
                    double z_coef, bool norm_topk_prob = true, int64_t shared = 0, int64_t sparse_step = 1) {
  c.name = std::move(name);
  c.num_experts = experts, c.top_k = top_k, c.moe_intermediate = width;
  c.aux_loss_coef = aux_coef, c.z_loss_coef = z_coef, c.norm_topk_prob = norm_topk_prob;
  c.shared_expert_intermediate = shared, c.sparse_step = sparse_step;
  return c;
}

// `c` with LoRA of rank r on `targets`.
ParityCase with_lora(ParityCase c, std::string name, int64_t r, double alpha, std::string targets, bool rslora) {
  c.name = std::move(name);
  c.lora_r = r;
  c.lora_alpha = alpha;
  c.lora_targets = std::move(targets);
  c.lora_rslora = rslora;
  return c;
}

// Per-step and evaluation results of one run.
struct RunResult {
  std::vector<double> loss, lr, grad_norm;
  std::map<int64_t, double> val_loss;
};

std::string python() {
  if (const char* p = std::getenv("TRIDENT_PARITY_PYTHON"); p != nullptr && *p) return p;
  return fs::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
}

std::string script_path(const std::string& arch) {
  const std::string source = __FILE__;
  return source.substr(0, source.rfind('/')) + "/" + arch + "_torch.py";
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Exit status of a shell command (-1 if it did not exit normally).
int shell(const std::string& cmd) {
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// A byte-level text with learnable structure: words from a small Markov chain (each word
// allows three successors), sentences of 4..9 words. Deterministic in `seed`.
std::vector<uint16_t> synthetic_text(size_t n_tokens, uint32_t seed) {
  static const char* const kWords[] = {"the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran",
                                       "to", "my", "old", "red", "barn", "while", "birds", "sang"};
  constexpr uint32_t kN = sizeof(kWords) / sizeof(kWords[0]);
  std::vector<uint16_t> out;
  uint32_t x = seed, word = 0, in_sentence = 0, sentence_len = 5;
  auto next = [&x] {
    x = x * 1664525u + 1013904223u;
    return x >> 8;
  };
  while (out.size() < n_tokens) {
    word = (word * 5 + 1 + next() % 3) % kN;
    std::string w = kWords[word];
    if (in_sentence == 0) w[0] = static_cast<char>(w[0] - 'a' + 'A');
    for (char c : w) out.push_back(static_cast<uint8_t>(c));
    if (++in_sentence == sentence_len) {
      out.push_back('.');
      out.push_back(next() % 4 == 0 ? '\n' : ' ');
      in_sentence = 0;
      sentence_len = 4 + next() % 6;
    } else {
      out.push_back(' ');
    }
  }
  out.resize(n_tokens);
  return out;
}

TrainConfig trident_config(const ParityCase& c, const fs::path& dir, const std::string& out = "trident_out") {
  TrainConfig cfg;
  cfg.model.arch = c.arch;
  if (c.arch == "llama")
    cfg.model.family_values = {{"n_kv_heads", c.n_kv_heads},
                               {"intermediate_size", c.intermediate_size},
                               {"rope_theta", c.rope_theta},
                               {"tie_word_embeddings", c.tie_word_embeddings},
                               {"qkv_bias", c.qkv_bias},
                               {"rope_scaling_factor", c.rope_scaling_factor},
                               {"rope_original_max_position", c.rope_original_max_position},
                               {"sliding_window", c.sliding_window},
                               {"num_local_experts", c.num_experts},
                               {"num_experts_per_tok", c.top_k},
                               {"moe_intermediate_size", c.moe_intermediate},
                               {"shared_expert_intermediate_size", c.shared_expert_intermediate},
                               {"norm_topk_prob", c.norm_topk_prob},
                               {"decoder_sparse_step", c.sparse_step},
                               {"router_aux_loss_coef", c.aux_loss_coef},
                               {"router_z_loss_coef", c.z_loss_coef}};
  cfg.model.n_layer = c.n_layer;
  cfg.model.n_head = c.n_head;
  cfg.model.n_embd = c.n_embd;
  cfg.model.block_size = c.block_size;
  cfg.model.vocab_size = c.vocab_size;
  cfg.model.dropout = 0.0;
  cfg.model.init_seed = c.init_seed;
  cfg.data.train_file = (dir / "train.bin").string();
  cfg.data.val_file = (dir / "val.bin").string();
  cfg.data.tokenizer = "byte";
  cfg.data.batch_size = c.batch_size;
  cfg.data.seq_len = c.seq_len;
  cfg.data.grad_accum_steps = c.grad_accum;
  cfg.data.sampler = "sequential";
  cfg.optim.lr = c.lr;
  cfg.optim.beta1 = c.beta1;
  cfg.optim.beta2 = c.beta2;
  cfg.optim.eps = c.eps;
  cfg.optim.weight_decay = c.weight_decay;
  cfg.optim.grad_clip = c.grad_clip;
  cfg.lr_schedule.shape = "cosine";
  cfg.lr_schedule.warmup_steps = c.warmup;
  cfg.lr_schedule.decay_steps = c.decay_steps;
  cfg.lr_schedule.min_lr = c.min_lr;
  cfg.train.steps = c.steps;
  cfg.train.eval_interval = c.eval_interval;
  cfg.train.eval_batches = c.eval_batches;
  cfg.train.log_interval = 1000;
  cfg.train.checkpoint_interval = 0;
  cfg.train.checkpoint_keep = 1;
  cfg.train.out_dir = (dir / out).string();
  cfg.train.init_from = (dir / "init.safetensors").string();
  cfg.train.resume = false;
  cfg.train.threads = 2;
  if (c.lora_r > 0) cfg.train.init_adapter = (dir / "adapter_init").string();
  return cfg;
}

std::string torch_args(const ParityCase& c, const fs::path& dir) {
  char buf[2048];
  std::snprintf(buf, sizeof buf,
                " --init '%s' --train '%s' --val '%s' --out '%s'"
                " --n-layer %lld --n-head %lld --n-embd %lld --block-size %lld --vocab-size %lld"
                " --batch-size %lld --seq-len %lld --grad-accum %lld --steps %lld"
                " --lr %.17g --min-lr %.17g --warmup %lld --decay-steps %lld"
                " --beta1 %.17g --beta2 %.17g --eps %.17g --weight-decay %.17g --grad-clip %.17g"
                " --eval-interval %lld --eval-batches %lld --log-interval 1000 --threads 2",
                (dir / "init.safetensors").c_str(), (dir / "train.bin").c_str(), (dir / "val.bin").c_str(),
                (dir / "torch.json").c_str(), (long long)c.n_layer, (long long)c.n_head, (long long)c.n_embd,
                (long long)c.block_size, (long long)c.vocab_size, (long long)c.batch_size, (long long)c.seq_len,
                (long long)c.grad_accum, (long long)c.steps, c.lr, c.min_lr, (long long)c.warmup,
                (long long)c.decay_steps, c.beta1, c.beta2, c.eps, c.weight_decay, c.grad_clip,
                (long long)c.eval_interval, (long long)c.eval_batches);
  std::string args = buf;
  if (c.arch == "llama") {
    std::snprintf(buf, sizeof buf,
                  " --n-kv-heads %lld --intermediate-size %lld --rope-theta %.17g --rms-norm-eps 1e-6%s%s"
                  " --rope-scaling-factor %.17g --rope-original-max-position %lld --sliding-window %lld",
                  (long long)(c.n_kv_heads > 0 ? c.n_kv_heads : c.n_head), (long long)c.intermediate_size, c.rope_theta,
                  c.tie_word_embeddings ? " --tie-word-embeddings" : "", c.qkv_bias ? " --qkv-bias" : "",
                  c.rope_scaling_factor, (long long)c.rope_original_max_position, (long long)c.sliding_window);
    args += buf;
  }
  if (c.num_experts > 0) {
    std::snprintf(buf, sizeof buf,
                  " --num-experts %lld --top-k %lld --moe-intermediate-size %lld --shared-expert-intermediate-size %lld"
                  " --decoder-sparse-step %lld --router-aux-loss-coef %.17g --router-z-loss-coef %.17g%s",
                  (long long)c.num_experts, (long long)c.top_k, (long long)c.moe_intermediate,
                  (long long)c.shared_expert_intermediate, (long long)c.sparse_step, c.aux_loss_coef, c.z_loss_coef,
                  c.norm_topk_prob ? "" : " --no-norm-topk-prob");
    args += buf;
  }
  if (c.lora_r > 0) args += " --lora-adapter '" + (dir / "adapter_init").string() + "'";
  return args;
}

double rel_diff(double a, double b) { return std::abs(a - b) / std::max(std::abs(b), 1e-30); }

class ParityTest : public ::testing::TestWithParam<ParityCase> {
 protected:
  void SetUp() override {
    const std::string check = "OMP_WAIT_POLICY=PASSIVE " + python() +
                              " -c 'import torch, numpy' > /dev/null 2>&1";
    if (shell(check) != 0)
      GTEST_SKIP() << "parity test needs PyTorch and numpy: '" << python()
                   << " -c \"import torch, numpy\"' failed (install Debian's python3-torch, or set "
                      "TRIDENT_PARITY_PYTHON to an interpreter that has them)";
    dir_ = fs::temp_directory_path() / ("trident_parity_" + std::to_string(::getpid()) + "_" + GetParam().name);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty() && !HasFailure()) fs::remove_all(dir_);
  }

  // The shared inputs: trident's seeded init as safetensors (HF names), token files.
  void write_inputs(const ParityCase& c) {
    const TrainConfig cfg = trident_config(c, dir_);
    const std::unique_ptr<models::CausalLM> model = models::build_model(cfg.model);
    std::vector<checkpoint::NamedTensor> tensors;
    for (const auto& [name, t] : model->named_parameters()) tensors.push_back({name, t});
    ASSERT_TRUE(checkpoint::save_safetensors(checkpoint::default_env(), cfg.train.init_from, tensors,
                                             {{"format", "pt"}})
                    .is_ok());
    // Train: enough for the run to wrap around the file (a batch straddles its end).
    const int64_t train_tokens_used = c.steps * c.grad_accum * c.batch_size * c.seq_len;
    const auto train = synthetic_text(static_cast<size_t>(train_tokens_used * 4 / 5), 12345u);
    const auto val = synthetic_text(static_cast<size_t>(c.eval_batches * c.batch_size * c.seq_len + 7), 777u);
    ASSERT_TRUE(data::write_token_file(cfg.data.train_file, train).is_ok());
    ASSERT_TRUE(data::write_token_file(cfg.data.val_file, val).is_ok());
    if (c.lora_r > 0) {
      char lora[512];
      std::snprintf(lora, sizeof lora, " --write-lora-adapter '%s' --lora-r %lld --lora-alpha %.17g --lora-targets '%s'%s",
                    (dir_ / "adapter_init").c_str(), (long long)c.lora_r, c.lora_alpha, c.lora_targets.c_str(),
                    c.lora_rslora ? " --lora-rslora" : "");
      const fs::path log = dir_ / "adapter_init.log";
      ParityCase without_lora = c;  // the model's arguments, without --lora-adapter
      without_lora.lora_r = 0;
      const std::string cmd = "OMP_WAIT_POLICY=PASSIVE " + python() + " '" + script_path(c.arch) + "'" +
                              torch_args(without_lora, dir_) +
                              lora + " > '" + log.string() + "' 2>&1";
      ASSERT_EQ(shell(cmd), 0) << "writing the PEFT adapter failed:\n  " << cmd << "\n" << slurp(log);
    }
  }

  // Issue #48: after a LoRA run the base's weights are bitwise the init's, and the PEFT files
  // trident wrote hold the final checkpoint's adapters bit for bit.
  void check_lora_run(const ParityCase& c) {
    const TrainConfig cfg = trident_config(c, dir_);
    char step[32];
    std::snprintf(step, sizeof step, "step_%06lld", (long long)c.steps);
    auto reader = checkpoint::CheckpointReader::open(checkpoint::default_env(), (dir_ / "trident_out" / step).string());
    ASSERT_TRUE(reader.is_ok()) << reader.status().message();
    auto init = checkpoint::load_safetensors(checkpoint::default_env(), cfg.train.init_from);
    ASSERT_TRUE(init.is_ok()) << init.status().message();
    int64_t base = 0;
    for (const checkpoint::NamedTensor& t : init.value()) {
      auto now = reader.value().load_tensor(t.name);
      ASSERT_TRUE(now.is_ok()) << now.status().message();
      ASSERT_EQ(now.value().nbytes(), t.tensor.nbytes()) << t.name;
      EXPECT_EQ(std::memcmp(now.value().raw_data(), t.tensor.raw_data(), t.tensor.nbytes()), 0)
          << "base weight " << t.name << " changed in a LoRA run";
      ++base;
    }
    auto peft = checkpoint::load_safetensors(checkpoint::default_env(),
                                             (dir_ / "trident_out" / "adapter" / "adapter_model.safetensors").string());
    ASSERT_TRUE(peft.is_ok()) << peft.status().message();
    auto peft_init = checkpoint::load_safetensors(checkpoint::default_env(),
                                                  (dir_ / "adapter_init" / "adapter_model.safetensors").string());
    ASSERT_TRUE(peft_init.is_ok()) << peft_init.status().message();
    std::map<std::string, Tensor> written;
    for (const checkpoint::NamedTensor& t : peft.value()) written.emplace(t.name, t.tensor);
    int64_t adapters = 0;
    for (const checkpoint::NamedTensor& t : peft_init.value()) {  // the reference's names are PEFT's
      ASSERT_TRUE(written.contains(t.name)) << "trident's adapter file lacks " << t.name;
      // Its name in the checkpoint: strip "base_model.model." and the family's module prefix.
      std::string name = t.name.substr(std::string("base_model.model.").size());
      name = name.substr(name.find(c.arch == "gpt2" ? "transformer." : "model.") == 0
                             ? std::string(c.arch == "gpt2" ? "transformer." : "model.").size()
                             : 0);
      auto now = reader.value().load_tensor(name);
      ASSERT_TRUE(now.is_ok()) << now.status().message();
      const Tensor& w = written.at(t.name);
      ASSERT_EQ(w.nbytes(), now.value().nbytes()) << t.name;
      EXPECT_EQ(std::memcmp(w.raw_data(), now.value().raw_data(), w.nbytes()), 0) << t.name;
      EXPECT_NE(std::memcmp(w.raw_data(), t.tensor.raw_data(), w.nbytes()), 0) << t.name << " did not train";
      ++adapters;
    }
    EXPECT_EQ(written.size(), static_cast<size_t>(adapters));
    std::printf("[%s] %lld base tensors unchanged bit for bit; %lld adapter tensors trained and written as PEFT's\n",
                c.name.c_str(), (long long)base, (long long)adapters);
  }

  RunResult run_trident(const ParityCase& c, const std::string& out = "trident_out") {
    RunResult r;
    auto trainer = Trainer::create(trident_config(c, dir_, out));
    EXPECT_TRUE(trainer.is_ok()) << trainer.status().message();
    if (!trainer.is_ok()) return r;
    Trainer& t = *trainer.value();
    t.show_progress = false;
    t.on_step = [&r](const StepMetrics& m) {
      r.loss.push_back(m.loss);
      r.lr.push_back(m.lr);
      r.grad_norm.push_back(m.grad_norm);
    };
    t.on_eval = [&r](int64_t step, double v) { r.val_loss[step] = v; };
    const Status s = t.run();
    EXPECT_TRUE(s.is_ok()) << s.message();
    return r;
  }

  RunResult run_torch(const ParityCase& c) {
    RunResult r;
    const fs::path log = dir_ / "torch.log";
    const std::string cmd = "OMP_WAIT_POLICY=PASSIVE " + python() + " '" + script_path(c.arch) + "'" +
                            torch_args(c, dir_) + " > '" + log.string() + "' 2>&1";
    const int status = shell(cmd);
    EXPECT_EQ(status, 0) << "the PyTorch side failed:\n  " << cmd << "\n" << slurp(log);
    if (status != 0) return r;
    const nlohmann::json j = nlohmann::json::parse(slurp(dir_ / "torch.json"));
    r.loss = j.at("train_loss").get<std::vector<double>>();
    r.lr = j.at("lr").get<std::vector<double>>();
    r.grad_norm = j.at("grad_norm").get<std::vector<double>>();
    for (const auto& [step, v] : j.at("val_loss").items()) r.val_loss[std::stoll(step)] = v.get<double>();
    return r;
  }

  fs::path dir_;
};

TEST_P(ParityTest, PerStepLossesMatchPyTorch) {
  const ParityCase& c = GetParam();
  write_inputs(c);
  if (HasFatalFailure()) return;
  const RunResult tri = run_trident(c);
  const RunResult ref = run_torch(c);
  ASSERT_EQ(tri.loss.size(), static_cast<size_t>(c.steps));
  ASSERT_EQ(ref.loss.size(), static_cast<size_t>(c.steps));

  double max_loss = 0.0, max_norm = 0.0;
  std::printf("[%s] step | trident loss    | torch loss      | rel diff | lr        | norm (tri/torch)\n",
              c.name.c_str());
  for (int64_t s = 0; s < c.steps; ++s) {
    const double dl = rel_diff(tri.loss[s], ref.loss[s]), dn = rel_diff(tri.grad_norm[s], ref.grad_norm[s]);
    max_loss = std::max(max_loss, dl);
    max_norm = std::max(max_norm, dn);
    std::printf("[%s] %4lld | %.12f | %.12f | %.2e | %.3e | %.6f / %.6f\n", c.name.c_str(), (long long)s + 1,
                tri.loss[s], ref.loss[s], dl, tri.lr[s], tri.grad_norm[s], ref.grad_norm[s]);
  }
  std::printf("[%s] max relative difference: loss %.3e, grad norm %.3e\n", c.name.c_str(), max_loss, max_norm);
  for (const auto& [step, v] : ref.val_loss) {
    const auto it = tri.val_loss.find(step);
    ASSERT_NE(it, tri.val_loss.end()) << "trident did not evaluate at step " << step;
    std::printf("[%s] val loss at step %lld: trident %.12f torch %.12f (rel %.2e)\n", c.name.c_str(),
                (long long)step, it->second, v, rel_diff(it->second, v));
  }

  for (int64_t s = 0; s < c.steps; ++s) {
    EXPECT_LE(rel_diff(tri.loss[s], ref.loss[s]), kLossRtol)
        << "step " << s + 1 << ": trident " << tri.loss[s] << ", torch " << ref.loss[s];
    EXPECT_NEAR(tri.lr[s], ref.lr[s], 1e-12 * c.lr) << "lr at step " << s + 1;
    EXPECT_LE(rel_diff(tri.grad_norm[s], ref.grad_norm[s]), kGradNormRtol)
        << "grad norm at step " << s + 1 << ": trident " << tri.grad_norm[s] << ", torch " << ref.grad_norm[s];
  }
  EXPECT_EQ(tri.val_loss.size(), ref.val_loss.size());
  for (const auto& [step, v] : ref.val_loss) {
    if (tri.val_loss.count(step)) {
      EXPECT_LE(rel_diff(tri.val_loss.at(step), v), kLossRtol) << "val loss at step " << step;
    }
  }

  // Where a case turns a variant on (Llama 3's RoPE scaling, a sliding window), the comparison
  // must be able to see it: the same run without it is much further from PyTorch's.
  auto check_resolves = [&](ParityCase off, const char* what) {
    const RunResult without = run_trident(off, "trident_out_without");
    ASSERT_EQ(without.loss.size(), ref.loss.size());
    double off_max = 0.0;
    for (int64_t s = 0; s < c.steps; ++s) off_max = std::max(off_max, rel_diff(without.loss[s], ref.loss[s]));
    std::printf("[%s] without the %s: max relative difference %.3e\n", c.name.c_str(), what, off_max);
    EXPECT_GT(off_max, 20 * std::max(max_loss, 1e-9)) << "the case does not resolve the " << what;
  };
  if (c.rope_scaling_factor > 0) {
    ParityCase off = c;
    off.rope_scaling_factor = 0.0;
    check_resolves(off, "RoPE scaling");
  }
  if (c.sliding_window > 0) {
    ParityCase off = c;
    off.sliding_window = 0;
    check_resolves(off, "sliding window");
  }

  if (c.aux_loss_coef > 0) {
    ParityCase off = c;
    off.aux_loss_coef = 0.0;
    off.z_loss_coef = 0.0;
    check_resolves(off, "router losses");
  }

  if (c.lora_r > 0) check_lora_run(c);
  // The run must have learned something, or the comparison says little (an adapter of rank r
  // on a frozen random base learns less in 20 steps).
  EXPECT_LT(tri.loss.back(), tri.loss.front() - (c.lora_r > 0 ? 0.2 : 0.5));
  // Clipping must actually have happened when the case turns it on.
  if (c.grad_clip > 0) {
    EXPECT_GT(*std::max_element(tri.grad_norm.begin(), tri.grad_norm.end()), c.grad_clip);
  }
  // Where the schedule ends inside the run, its last steps run at min_lr.
  const int64_t decay = c.decay_steps > 0 ? c.decay_steps : c.steps;
  for (int64_t s = decay; s < c.steps; ++s) EXPECT_DOUBLE_EQ(tri.lr[s], c.min_lr) << "step " << s + 1;
}

// name, L, NH, C, block, V, B, T, accum, steps, lr, min_lr, warmup, decay_steps,
// beta1, beta2, eps, wd, clip, eval_interval, eval_batches, init_seed
INSTANTIATE_TEST_SUITE_P(
    Parity, ParityTest,
    ::testing::Values(
        // Issue #3's case: gradient accumulation, warmup then cosine over the whole run,
        // weight decay, clipping that triggers (the initial norms are above 1).
        ParityCase{"accum2_clip", 2, 2, 64, 32, 256, 4, 32, 2, 20, 2e-3, 1e-4, 5, 0,
                   0.9, 0.95, 1e-8, 0.1, 1.0, 10, 4, 1337},
        // No accumulation, seq_len < block_size, the cosine reaching min_lr at step 14 and
        // staying there, no clipping, other betas.
        ParityCase{"accum1_minlr", 3, 4, 48, 32, 256, 6, 24, 1, 20, 2e-3, 2e-4, 3, 14,
                   0.8, 0.99, 1e-6, 0.05, 0.0, 7, 3, 42},
        // LLaMA (issue #22): grouped-query attention, 8 heads sharing 2 kv heads, an untied head,
        // RoPE at Llama 3's base; gradient accumulation and clipping.
        ParityCase{"llama_gqa", 2, 8, 64, 32, 256, 4, 32, 2, 20, 2e-3, 1e-4, 5, 0,
                   0.9, 0.95, 1e-8, 0.1, 1.0, 10, 4, 1337, "llama", 2, 176, 500000.0, false, false},
        // Llama 3's RoPE scaling (factor 8, original length 32: bands at wavelengths 8 and 32, so
        // at head size 16 and base 10000 pair 0 is kept, pair 1 blended, the rest divided; the
        // angles change by radians within the 32 positions), GQA 4/2.
        ParityCase{"llama3_rope_scaling", 2, 4, 64, 32, 256, 4, 32, 2, 20, 2e-3, 1e-4, 5, 0,
                   0.9, 0.95, 1e-8, 0.1, 1.0, 10, 4, 7, "llama", 2, 176, 10000.0, false, false, 8.0, 32},
        // Qwen2-style: q, k and v biases, a tied head, multi-head attention (kv heads = heads).
        ParityCase{"qwen2_bias_tied", 2, 4, 48, 32, 256, 6, 24, 1, 20, 2e-3, 2e-4, 3, 14,
                   0.8, 0.99, 1e-6, 0.05, 0.0, 7, 3, 42, "llama", 0, 128, 10000.0, true, true},
        // Mistral: a sliding window of 8 keys in sequences of 32, GQA 4/2.
        ParityCase{"mistral_sliding_window", 2, 4, 64, 32, 256, 4, 32, 2, 20, 2e-3, 1e-4, 5, 0,
                   0.9, 0.95, 1e-8, 0.1, 1.0, 10, 4, 11, "llama", 2, 176, 10000.0, false, false, 0.0, 8192, 8},
        // LoRA (issue #48) on a LLaMA with grouped-query attention: every projection adapted.
        with_lora(ParityCase{"", 2, 8, 64, 32, 256, 4, 32, 2, 20, 1e-2, 1e-3, 3, 0, 0.9, 0.95, 1e-8, 0.1, 0.5, 10, 4,
                             1337, "llama", 2, 176, 500000.0, false, false},
                  "lora_llama_gqa", 4, 8.0, "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj", false),
        // LoRA on GPT-2's Conv1D layers (c_proj names two layers per block), rsLoRA's scaling.
        with_lora(ParityCase{"", 2, 2, 64, 32, 256, 4, 32, 1, 20, 1e-2, 1e-3, 3, 0, 0.9, 0.95, 1e-8, 0.1, 0.5, 10, 4,
                             1337},
                  "lora_gpt2_rslora", 8, 16.0, "c_attn,c_proj,c_fc", true),
        // Mixtral (issue #51): 4 experts per layer, top-2 renormalised, the load-balancing and
        // z losses (large coefficients, so that they move the run), GQA 4/2.
        with_moe(ParityCase{"", 2, 4, 64, 32, 256, 4, 32, 2, 20, 2e-3, 1e-4, 5, 0, 0.9, 0.95, 1e-8, 0.1, 1.0, 10, 4,
                            21, "llama", 2, 176},
                 "mixtral_top2", 4, 2, 96, 0.5, 0.05),
        // Qwen2-MoE: q/k/v biases, a tied head, the second layer sparse (the first dense), raw
        // top-2 weights of 6 experts, a sigmoid-gated shared expert.
        with_moe(ParityCase{"", 2, 4, 48, 32, 256, 6, 24, 1, 20, 2e-3, 2e-4, 3, 14, 0.8, 0.99, 1e-6, 0.05, 0.0, 7, 3,
                            42, "llama", 0, 128, 10000.0, true, true},
                 "qwen2_moe_shared", 6, 2, 32, 0.3, 0.0, false, 64, 2)),
    [](const ::testing::TestParamInfo<ParityCase>& info) { return info.param.name; });

}  // namespace
}  // namespace trident::train
