// Activation memory of one GPT-2 training micro-step (forward + backward) under each
// activation-checkpointing mode, from the host allocator's statistics, as JSON.
//
// "activation_peak_mib" is the allocator's peak bytes in use during the step minus the model
// states alive at that point's end (parameters and their gradients; no optimizer here), the
// quantity issue #4 asks full checkpointing to cut by 3x. "head" compares the fused LM head
// + cross-entropy (the model's loss) with the plain one (logits (B,T,V), then cross_entropy).
// Each mode's losses and gradient norms are printed too: checkpointing must not change them.
//
// Usage: activation_memory_bench [--layers L] [--embd C] [--heads NH] [--T T] [--B B]
//                                [--threads N] [--modes none,selective,full] [--unfused-head]
// Defaults: GPT-2 124M (L=12, C=768, NH=12, V=50257), T=1024, B=4.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "autograd/functions.h"
#include "core/allocator.h"
#include "core/factory.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "models/gpt2/model.h"

using namespace trident;
using Clock = std::chrono::steady_clock;

namespace {

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

int64_t tensor_bytes(const std::vector<Tensor>& ts, bool grads) {
  int64_t total = 0;
  for (const Tensor& t : ts) {
    if (!grads) total += t.numel() * static_cast<int64_t>(element_size(t.dtype()));
    else if (t.grad()) total += t.grad()->numel() * static_cast<int64_t>(element_size(t.grad()->dtype()));
  }
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  models::gpt2::GPT2Config cfg;  // 124M defaults
  int64_t T = 1024, B = 4, threads = 0;
  bool unfused = false;
  std::vector<std::string> modes = {"none", "selective", "full"};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--layers") cfg.n_layer = std::stoll(next());
    else if (a == "--embd") cfg.n_embd = std::stoll(next());
    else if (a == "--heads") cfg.n_head = std::stoll(next());
    else if (a == "--T") T = std::stoll(next());
    else if (a == "--B") B = std::stoll(next());
    else if (a == "--threads") threads = std::stoll(next());
    else if (a == "--unfused-head") unfused = true;
    else if (a == "--modes") {
      modes.clear();
      std::stringstream ss(next());
      for (std::string m; std::getline(ss, m, ',');) modes.push_back(m);
    } else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (threads > 0) set_num_threads(static_cast<int>(threads));
  set_flush_denormals(true);
  cfg.block_size = std::max<int64_t>(cfg.block_size, T);
  Generator data_gen(42);
  const Tensor idx = randint(0, cfg.vocab_size, {B, T}, data_gen);
  const Tensor targets = randint(0, cfg.vocab_size, {B, T}, data_gen);

  nlohmann::json results = nlohmann::json::array();
  for (const std::string& mode : modes) {
    cfg.activation_checkpointing = mode;
    models::gpt2::GPT2 model(cfg);
    model.train();
    const std::vector<Tensor> params = model.parameters();
    Allocator& alloc = host_allocator();
    alloc.reset_peak_stats();
    const auto t0 = Clock::now();
    double loss_value = 0.0;
    {
      MemoryCategoryGuard activations(MemoryCategory::kActivation);
      const Tensor loss = unfused ? cross_entropy(view(model.forward(idx), {-1, cfg.vocab_size}), reshape(targets, {-1}))
                                  : model.loss(idx, targets);
      loss_value = loss.item();
      autograd::backward(loss);
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    const MemoryStats s = alloc.stats();
    const int64_t param_bytes = tensor_bytes(params, false), grad_bytes = tensor_bytes(params, true);
    double grad_sq = 0.0;
    for (const Tensor& p : params)
      for (float g : to_vector<float>(*p.grad())) grad_sq += static_cast<double>(g) * g;
    results.push_back({{"mode", mode},
                       {"head", unfused ? "logits + cross_entropy" : "fused linear_cross_entropy"},
                       {"loss", loss_value},
                       {"grad_norm", std::sqrt(grad_sq)},
                       {"peak_in_use_mib", mib(s.in_use.peak)},
                       {"params_mib", mib(param_bytes)},
                       {"grads_mib", mib(grad_bytes)},
                       {"activation_peak_mib", mib(s.in_use.peak - param_bytes - grad_bytes)},
                       {"forward_backward_s", seconds}});
    std::fprintf(stderr, "%s: loss %.6f, peak %.0f MiB, activations %.0f MiB, %.1f s\n", mode.c_str(), loss_value,
                 mib(s.in_use.peak), mib(s.in_use.peak - param_bytes - grad_bytes), seconds);
  }
  nlohmann::json out = {{"benchmark", "activation_memory"},
                        {"config", {{"n_layer", cfg.n_layer}, {"n_embd", cfg.n_embd}, {"n_head", cfg.n_head},
                                    {"vocab_size", cfg.vocab_size}, {"T", T}, {"B", B}}},
                        {"threads", num_threads()},
                        {"results", results}};
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
