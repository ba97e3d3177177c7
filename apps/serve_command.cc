// `trident serve`: loads a model as `sample` does and serves it (serve/server.h) until SIGINT or
// SIGTERM.
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "cli_checks.h"
#include "commands.h"
#include "core/parallel.h"
#include "data/chat_template.h"
#include "infer/kv_cache.h"
#include "loading/model_source.h"
#include "serve/server.h"

namespace trident::cli {
namespace {

serve::Server* g_server = nullptr;

void stop_on_signal(int) {
  if (g_server != nullptr) g_server->stop();
}

}  // namespace

CLI::App* add_serve(CLI::App& app, ServeArgs& a) {
  CLI::App* c = app.add_subcommand("serve", "Serve a model over OpenAI's completions and chat completions API");
  c->add_option("--checkpoint", a.checkpoint,
                "checkpoint directory, a run directory (its latest), or a Hugging Face model directory")
      ->required();
  c->add_option("--host", a.host, "address to listen on");
  c->add_option("--port", a.port, "port to listen on (0: any free one, printed)")->check(CLI::Range(0, 65535));
  c->add_option("--model-name", a.model_name, "the name requests give as \"model\" (default: the directory's name)");
  c->add_option("--max-batch", a.max_batch, "requests generated together")->check(CLI::Range(1, 1024));
  c->add_option("--context", a.context, "tokens per request, prompt included (0: the model's block_size)")
      ->check(kNonNegative);
  c->add_option("--kv-cache-tokens", a.kv_cache_tokens,
                "tokens of keys and values the batch shares, in blocks of 64 (0: enough for every request's "
                "longest context at once; less admits a request when its blocks are free, as llama.cpp's --ctx-size)")
      ->check(kNonNegative);
  c->add_option("--chat-template", a.chat_template,
                "how chat messages are rendered: llama3, chatml or plain (default: the model directory's, else plain)");
  c->add_option("--tokenizer", a.tokenizer, "the tokenizer (default: as for sample)");
  c->add_option("--vocab", a.vocab_dir, "the tokenizer's files (default: the checkpoint config's data.vocab_dir)");
  c->add_option("--adapter", a.adapter, "a PEFT LoRA adapter directory applied to the model");
  c->add_option("--threads", a.threads, "CPU threads (0: all cores)")->check(kNonNegative);
  c->add_option("--response-deadline", a.response_deadline_s, "seconds one answer (a whole stream) may take")
      ->check(number_in(1.0, true, 86400.0, "[1, 86400]"));
  c->add_option("--max-connections", a.max_connections, "connections open at once")->check(CLI::Range(1, 4096));
  c->add_option("--max-body", a.max_body_bytes, "largest request body in bytes")->check(CLI::Range(1024, 1 << 30));
  c->add_option("--api-key", a.api_key, "require 'Authorization: Bearer KEY' (default: $TRIDENT_API_KEY, else none)");
  c->add_option("--max-queue", a.max_queue, "requests waiting for a slot; more are answered 429")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  return c;
}

Status run_serve(const ServeArgs& a) {
  using loading::load_model, loading::load_tokenizer, loading::resolve_model_source;
  if (a.threads > 0) set_num_threads(static_cast<int>(a.threads));
  auto src = resolve_model_source(a.checkpoint);
  if (!src.is_ok()) return src.status();
  auto tok = load_tokenizer(src.value(), a.tokenizer, a.vocab_dir);
  if (!tok.is_ok()) return tok.status();
  auto model = load_model(src.value(), a.adapter);
  if (!model.is_ok()) return model.status();
  serve::ServeOptions options;
  options.host = a.host;
  options.port = a.port;
  // By default the name the user gave the directory (a run directory's, not its latest step's).
  std::filesystem::path given = std::filesystem::path(a.checkpoint).lexically_normal();
  if (given.filename().empty()) given = given.parent_path();
  options.model_name = !a.model_name.empty() ? a.model_name : given.filename().string();
  if (options.model_name.empty()) options.model_name = "trident";
  options.chat_template = a.chat_template;
  if (options.chat_template.empty() && src.value().hf) {
    auto found = data::chat_template_of_model_dir(src.value().dir);
    if (!found.is_ok()) return found.status();
    if (found.value()) options.chat_template = *found.value();
  }
  if (options.chat_template.empty()) options.chat_template = "plain";
  try {
    (void)data::generation_prompt(options.chat_template);
  } catch (const std::exception& e) {
    return Status::invalid(std::string("--chat-template: ") + e.what());
  }
  options.api_key = a.api_key;
  if (const char* key = std::getenv("TRIDENT_API_KEY"); options.api_key.empty() && key != nullptr) options.api_key = key;
  options.max_queue = a.max_queue;
  options.limits.response_deadline_s = a.response_deadline_s;
  options.limits.max_connections = a.max_connections;
  options.limits.max_body_bytes = static_cast<size_t>(a.max_body_bytes);
  options.limits.request_deadline_s = 30;
  options.limits.idle_timeout_s = 30;
  try {
    serve::Server server(*model.value(), *tok.value(), options,
                         {.max_batch = a.max_batch, .capacity = a.context, .cache_tokens = a.kv_cache_tokens});
    const int port = server.bind();
    std::printf("serving %s as \"%s\" on http://%s:%d/v1 (max batch %lld, context %lld tokens, KV cache %.1f MiB: "
                "%lld tokens in blocks of %lld, chat template %s)\n",
                src.value().dir.c_str(), options.model_name.c_str(), a.host.c_str(), port,
                static_cast<long long>(a.max_batch),
                static_cast<long long>(a.context > 0 ? a.context : src.value().cfg.model.block_size),
                static_cast<double>(server.cache_bytes()) / (1 << 20),
                static_cast<long long>(server.cache_bytes() / server.cache_bytes_per_token()),
                static_cast<long long>(infer::KvCache::kBlockTokens), options.chat_template.c_str());
    std::fflush(stdout);
    g_server = &server;
    std::signal(SIGINT, stop_on_signal);
    std::signal(SIGTERM, stop_on_signal);
    server.run();
    g_server = nullptr;
  } catch (const std::exception& e) {
    return Status::invalid(e.what());
  }
  return Status::ok();
}

}  // namespace trident::cli
