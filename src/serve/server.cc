#include "serve/server.h"

#include <chrono>
#include <random>

#include <nlohmann/json.hpp>

#include "core/allocator.h"
#include "core/check.h"
#include "data/chat_template.h"
#include "monitor/http_server_bounded.h"
#include "monitor/prometheus_text.h"
#include "serve/openai_api.h"
#include "serve/scheduler.h"
#include "serve/text_stream.h"

namespace trident::serve {
namespace {

using nlohmann::json;

// Model text may hold broken UTF-8 (a generation cut inside a character): replaced, not thrown.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void answer_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(e.body(), "application/json");
}

// A refused body's size as its request declared it.
std::string body_size(const httplib::Request& req) {
  const std::string length = req.get_header_value("Content-Length");
  return length.empty() ? "sent in chunks" : length + " bytes";
}

// How long a handler waits for the engine's next event before asking again (the engine may be
// busy with a long prompt; the wait is only a poll interval).
constexpr int64_t kPollMs = 1000;

}  // namespace

struct Server::Metrics {
  explicit Metrics(monitor::Registry& r)
      : completions(r.counter("trident_serve_requests_total", "requests answered, by endpoint", {{"endpoint", "completions"}})),
        chats(r.counter("trident_serve_requests_total", "requests answered, by endpoint", {{"endpoint", "chat"}})),
        refused(r.counter("trident_serve_refused_total", "requests answered with a 4xx or 5xx")),
        prompt_tokens(r.counter("trident_serve_prompt_tokens_total", "prompt tokens read")),
        generated_tokens(r.counter("trident_serve_generated_tokens_total", "tokens generated")),
        cancelled(r.counter("trident_serve_cancelled_total",
                            "requests ended before the engine finished them (a client gone, a stop string, a "
                            "deadline): their slots freed early")),
        connections(r.counter("trident_serve_connections_total", "connections accepted")),
        evicted(r.counter("trident_serve_connections_evicted_total",
                          "idle or reading connections dropped for a newer one (max connections open)")),
        deadline_expired(r.counter("trident_serve_deadline_expired_total",
                                   "requests or answers ended at their deadline (request or response)")),
        busy(r.counter("trident_serve_connections_refused_total",
                       "connections answered 503: every connection busy answering and the queue full")),
        open(r.gauge("trident_serve_open_connections", "connections open now")),
        memory_in_use(r.gauge("trident_serve_host_memory_in_use_bytes",
                              "bytes of live tensors in trident's host allocator (weights, KV cache, a step's)")),
        memory_reserved(r.gauge("trident_serve_host_memory_reserved_bytes",
                                "bytes trident's host allocator holds from the system: live and cached blocks")),
        running(r.gauge("trident_serve_running_requests", "requests in the running batch")),
        queued(r.gauge("trident_serve_queued_requests", "requests waiting for a slot")),
        ttft(r.histogram("trident_serve_time_to_first_token_seconds", "from a request's arrival to its first token",
                         {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30})),
        duration(r.histogram("trident_serve_request_seconds", "from a request's arrival to its last token",
                             {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300})),
        batch_size(r.histogram("trident_serve_batch_size", "requests that took a token in one engine step",
                               monitor::exponential_buckets(1, 2, 11))) {}
  monitor::Counter &completions, &chats, &refused, &prompt_tokens, &generated_tokens, &cancelled;
  monitor::Counter &connections, &evicted, &deadline_expired, &busy;  // the HTTP server's limits at work
  monitor::Gauge &open, &memory_in_use, &memory_reserved, &running, &queued;
  monitor::Histogram &ttft, &duration, &batch_size;
};

struct Server::Prepared {
  infer::GenerationRequest generation;
  std::vector<std::string> stop;
};

Server::Server(const models::CausalLM& model, const data::Tokenizer& tokenizer, const ServeOptions& options,
               const infer::EngineOptions& engine)
    : model_(model), tokenizer_(tokenizer), options_(options),
      m_(std::make_unique<Metrics>(metrics_)),
      scheduler_(std::make_unique<Scheduler>(model, engine,
                                             [this](int64_t batch) { m_->batch_size.observe(static_cast<double>(batch)); })),
      http_(std::make_unique<monitor::BoundedHttpServer>(options.limits)) {
  auto completions = [this](bool chat) {
    return [this, chat](const httplib::Request& req, httplib::Response& res) {
      const auto arrived = std::chrono::steady_clock::now();
      auto seconds = [arrived] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - arrived).count();
      };
      (chat ? m_->chats : m_->completions).inc();
      CompletionRequest r;
      Prepared p;
      try {
        if (!options_.api_key.empty() && req.get_header_value("Authorization") != "Bearer " + options_.api_key)
          throw ApiError(401, "a valid API key is required: send it as 'Authorization: Bearer KEY'", "",
                         "invalid_request_error");
        const auto [running, queued] = scheduler_->load();
        if (queued >= options_.max_queue)
          throw ApiError(429, "the server is at capacity: " + std::to_string(queued) + " requests are waiting; retry later",
                         "", "rate_limit_exceeded");
        r = parse_completion_request(req.body, chat);
        if (r.model != options_.model_name)
          throw ApiError(404, "the model '" + r.model + "' does not exist: this server serves '" + options_.model_name + "'",
                         "model");
        p = prepare(r);
      } catch (const ApiError& e) {
        m_->refused.inc();
        return answer_error(res, e);
      }
      std::shared_ptr<Stream> stream;
      try {
        stream = scheduler_->submit(p.generation);
      } catch (const std::exception& e) {
        m_->refused.inc();
        return answer_error(res, ApiError(400, e.what()));
      }
      m_->prompt_tokens.inc(static_cast<double>(p.generation.prompt.size()));
      const std::string id = std::string(chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id_++);
      const int64_t created = now_seconds();
      const int64_t prompt_tokens = static_cast<int64_t>(p.generation.prompt.size());
      if (!r.stream) {
        TextStream text(tokenizer_, p.stop, p.generation.prompt);
        std::string finish;
        for (;;) {
          const std::optional<infer::StepEvent> e = stream->next(kPollMs);
          if (!e) {
            if (seconds() <= options_.limits.response_deadline_s) continue;
            scheduler_->cancel(stream);
            m_->refused.inc();
            return answer_error(res, ApiError(504, "the request took longer than the server's deadline of " +
                                                       std::to_string(options_.limits.response_deadline_s) + " s",
                                              "", "server_error"));
          }
          if (e->finish_reason && *e->finish_reason == "error") {
            m_->refused.inc();
            return answer_error(res, ApiError(500, "generation failed: " + stream->error(), "", "server_error"));
          }
          if (e->token) {
            if (text.tokens() == 0) m_->ttft.observe(seconds());
            m_->generated_tokens.inc();
            text.add(*e->token);
          }
          if (text.stopped()) {
            scheduler_->cancel(stream);
            finish = "stop";
            break;
          }
          if (e->finish_reason) {
            text.finish();
            finish = *e->finish_reason;
            break;
          }
        }
        m_->duration.observe(seconds());
        res.set_content(dump(completion_response(r, id, created, text.sent(), finish, {prompt_tokens, text.tokens()})),
                        "application/json");
        return;
      }
      // Server-sent events: a chunk per piece of text, the finish reason, optionally the usage,
      // then [DONE]. A client that stops reading cancels the request.
      auto state = std::make_shared<TextStream>(tokenizer_, p.stop, p.generation.prompt);
      res.set_header("Cache-Control", "no-cache");
      res.set_chunked_content_provider(
          "text/event-stream",
          [this, r, id, created, prompt_tokens, stream, state, seconds](size_t, httplib::DataSink& sink) {
            auto send = [&](const json& j) {
              const std::string line = "data: " + dump(j) + "\n\n";
              return sink.write(line.data(), line.size());
            };
            bool first = true;
            for (;;) {
              const std::optional<infer::StepEvent> e = stream->next(kPollMs);
              if (!sink.is_writable()) break;
              if (!e) continue;
              std::optional<std::string> finish = e->finish_reason;
              if (finish && *finish == "error") {
                send(json{{"error", {{"message", "generation failed: " + stream->error()}, {"type", "server_error"}}}});
                break;
              }
              if (e->token) {
                if (state->tokens() == 0) m_->ttft.observe(seconds());
                m_->generated_tokens.inc();
              }
              std::string delta = e->token ? state->add(*e->token) : "";
              if (state->stopped()) finish = "stop";
              else if (finish) delta += state->finish();
              if ((!delta.empty() || finish || first) && !send(completion_chunk(r, id, created, delta, finish, first)))
                break;
              first = false;
              if (finish) {
                m_->duration.observe(seconds());
                if (state->stopped()) scheduler_->cancel(stream);
                if (r.include_usage) {
                  json usage = completion_chunk(r, id, created, "", std::nullopt, false);
                  usage["choices"] = json::array();
                  usage["usage"] = {{"prompt_tokens", prompt_tokens},
                                    {"completion_tokens", state->tokens()},
                                    {"total_tokens", prompt_tokens + state->tokens()}};
                  send(usage);
                }
                const std::string done = "data: [DONE]\n\n";
                sink.write(done.data(), done.size());
                sink.done();
                return true;
              }
            }
            scheduler_->cancel(stream);  // the client is gone
            return false;
          });
    };
  };
  http_->route("POST", "/v1/completions", completions(false));
  http_->route("POST", "/v1/chat/completions", completions(true));
  http_->route("GET", "/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(dump(json{{"object", "list"},
                              {"data", json::array({{{"id", options_.model_name},
                                                     {"object", "model"},
                                                     {"created", now_seconds()},
                                                     {"owned_by", "trident"},
                                                     {"max_model_len", scheduler_->context()}}})}}),
                    "application/json");
  });
  http_->route("GET", "/metrics", [this](const httplib::Request&, httplib::Response& res) {
    const auto [running, queued] = scheduler_->load();
    m_->running.set(static_cast<double>(running));
    m_->queued.set(static_cast<double>(queued));
    m_->cancelled.set_total(static_cast<double>(scheduler_->cancelled()));
    const monitor::HttpServerLimitStats http = http_->limit_stats();
    m_->connections.set_total(static_cast<double>(http.connections));
    m_->evicted.set_total(static_cast<double>(http.evicted));
    m_->deadline_expired.set_total(static_cast<double>(http.deadline_expired));
    m_->busy.set_total(static_cast<double>(http.refused));
    m_->open.set(static_cast<double>(http.open));
    const MemoryStats memory = host_allocator().stats();
    m_->memory_in_use.set(static_cast<double>(memory.in_use.current));
    m_->memory_reserved.set(static_cast<double>(memory.reserved));
    res.set_content(monitor::prometheus_text(metrics_), monitor::kPrometheusContentType);
  });
  http_->route("GET", "/health", [this](const httplib::Request&, httplib::Response& res) {
    const auto [running, queued] = scheduler_->load();
    res.set_content(dump(json{{"status", "ok"}, {"running", running}, {"queued", queued}}), "application/json");
  });
  http_->set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;  // a handler's own error answer, counted there
    m_->refused.inc();
    const std::string what = res.status == 404   ? "no such endpoint: " + req.method + " " + req.path
                             : res.status == 405 ? "method " + req.method + " is not allowed on " + req.path
                             : res.status == 413 ? "the body (" + body_size(req) + ") is larger than the server accepts: at most " +
                                                       std::to_string(options_.limits.max_body_bytes) + " bytes"
                             : res.status == 411 ? "a POST needs a Content-Length"
                                                 : "the request was refused";
    res.set_content(ApiError(res.status, what).body(), "application/json");
  });
}

Server::~Server() {
  stop();
}

std::vector<int64_t> Server::encode(const std::string& text, bool special) const {
  std::vector<int64_t> ids;
  for (data::TokenId t : tokenizer_.encode(text, special)) ids.push_back(t);
  return ids;
}

Server::Prepared Server::prepare(const CompletionRequest& r) const {
  Prepared p;
  std::vector<int64_t>& prompt = p.generation.prompt;
  const std::optional<data::TokenId> eot = tokenizer_.eot_id();
  if (eot) p.generation.stop_tokens.push_back(*eot);
  if (r.chat) {
    std::vector<data::ChatPiece> pieces = data::render_chat(options_.chat_template, r.messages);
    const data::GenerationPrompt gen = data::generation_prompt(options_.chat_template);
    pieces.insert(pieces.end(), gen.header.begin(), gen.header.end());
    for (const data::ChatPiece& piece : pieces) {
      if (piece.end_of_text) {
        if (eot) prompt.push_back(*eot);
        continue;
      }
      const std::vector<int64_t> ids = encode(piece.text, piece.special);
      prompt.insert(prompt.end(), ids.begin(), ids.end());
    }
    if (!gen.end_of_turn.empty()) {
      const std::vector<int64_t> end = encode(gen.end_of_turn, true);
      if (end.size() == 1) p.generation.stop_tokens.push_back(end[0]);
      else p.stop.push_back(gen.end_of_turn);  // the tokenizer lacks the token: stop on its text
    }
  } else {
    prompt = encode(r.prompt, true);
    if (prompt.empty()) throw ApiError(400, "'prompt' is empty: nothing to continue", "prompt");
  }
  const int64_t context = scheduler_->context(), n = static_cast<int64_t>(prompt.size());
  const std::string field = r.chat ? "messages" : "prompt";
  if (n > context)
    throw ApiError(400, "'" + field + "' is " + std::to_string(n) + " tokens: this model's context is " +
                            std::to_string(context) + " tokens", field);
  const int64_t room = context - n + 1;  // the last token needs no room in the cache
  // The field the request named (parse_completion_request reads max_completion_tokens first).
  const std::string& max_field = r.max_tokens_field;
  if (r.max_tokens && *r.max_tokens > room)
    throw ApiError(400, "'" + max_field + "' is " + std::to_string(*r.max_tokens) + ": this model's context is " +
                            std::to_string(context) + " tokens and the " + field + " has " + std::to_string(n) +
                            ", leaving room for " + std::to_string(room) + " new tokens",
                   max_field);
  p.generation.max_tokens = r.max_tokens.value_or(room);
  p.generation.sampling.temperature = r.temperature;
  p.generation.sampling.top_p = r.top_p;
  p.generation.sampling.top_k = r.top_k;
  p.generation.sampling.repetition_penalty = r.repetition_penalty;
  static thread_local std::mt19937_64 seeds{std::random_device{}()};
  p.generation.sampling.seed = r.seed ? *r.seed : seeds();
  for (const std::string& s : r.stop) p.stop.push_back(s);
  return p;
}

int Server::bind() {
  port_ = options_.port == 0 ? http_->bind_to_any_port(options_.host) : (http_->bind_to_port(options_.host, options_.port) ? options_.port : -1);
  TRI_CHECK(port_ > 0, "serve: cannot listen on ", options_.host, ":", options_.port,
            " (in use, or not an address of this machine)");
  return port_;
}

void Server::run() { http_->listen_after_bind(); }

int64_t Server::cache_bytes() const { return scheduler_->cache_bytes(); }
int64_t Server::cache_bytes_per_token() const { return scheduler_->cache_bytes_per_token(); }

void Server::stop() {
  if (http_) http_->stop();
}

}  // namespace trident::serve
