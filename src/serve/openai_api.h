// OpenAI's completions and chat completions API, as far as trident serves it: the requests'
// fields read and checked (every error an ApiError naming the field, OpenAI's error shape),
// and the responses and stream chunks written. Fields trident does not use (user, logit_bias,
// ...) are accepted and ignored, as OpenAI-compatible servers do; a known field of the wrong type
// or value is an error. Extensions vLLM also has: top_k, repetition_penalty.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/chat_template.h"

namespace trident::serve {

// An answer other than 200: its status, message, and the request field it is about.
struct ApiError : std::runtime_error {
  ApiError(int status, std::string message, std::string param = "", std::string type = "invalid_request_error")
      : std::runtime_error(message), status(status), param(std::move(param)), type(std::move(type)) {}
  int status;
  std::string param, type;
  // {"error": {"message", "type", "param", "code"}}
  std::string body() const;
};

struct CompletionRequest {
  bool chat = false;
  std::string model;
  std::string prompt;                          // completions
  std::vector<data::ChatMessage> messages;     // chat completions
  std::optional<int64_t> max_tokens;           // none: up to the context
  std::string max_tokens_field = "max_tokens"; // the field it came from (chat: or max_completion_tokens)
  double temperature = 1.0;                    // 0: greedy
  double top_p = 1.0;
  int64_t top_k = 0;
  double repetition_penalty = 1.0;
  std::vector<std::string> stop;               // at most 4, as OpenAI
  std::optional<uint64_t> seed;
  bool stream = false;
  bool include_usage = false;                  // stream_options.include_usage
};

// Reads a request body. Throws ApiError (400) naming the field.
CompletionRequest parse_completion_request(const std::string& body, bool chat);

struct Usage {
  int64_t prompt_tokens = 0, completion_tokens = 0;
};

// The whole answer of a request (stream false).
nlohmann::json completion_response(const CompletionRequest& r, const std::string& id, int64_t created,
                                   const std::string& text, const std::string& finish_reason, const Usage& usage);
// One stream chunk: a text delta, and on the last chunk the finish reason. `first` chat
// chunks carry the assistant role.
nlohmann::json completion_chunk(const CompletionRequest& r, const std::string& id, int64_t created,
                                const std::string& delta, const std::optional<std::string>& finish_reason, bool first);

}  // namespace trident::serve
