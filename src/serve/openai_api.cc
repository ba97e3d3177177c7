#include "serve/openai_api.h"

#include <cmath>
#include <limits>

namespace trident::serve {
namespace {

using nlohmann::json;

std::string type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    default: return "a number";
  }
}

[[noreturn]] void bad(const std::string& field, const std::string& what) { throw ApiError(400, "'" + field + "' " + what, field); }

double number(const json& j, const std::string& field, double lo, double hi) {
  const json& v = j.at(field);
  if (!v.is_number()) bad(field, "is " + type_name(v) + ", not a number");
  const double x = v.get<double>();
  if (!(x >= lo && x <= hi)) bad(field, "is " + v.dump() + ": allowed: " + json(lo).dump() + " to " + json(hi).dump());
  return x;
}

int64_t integer(const json& j, const std::string& field, int64_t lo, int64_t hi) {
  const json& v = j.at(field);
  if (!v.is_number_integer() && !(v.is_number_float() && std::floor(v.get<double>()) == v.get<double>()))
    bad(field, "is " + (v.is_number() ? v.dump() : type_name(v)) + ", not an integer");
  const double x = v.get<double>();
  if (!(x >= static_cast<double>(lo) && x <= static_cast<double>(hi)))
    bad(field, "is " + v.dump() + ": allowed: " + std::to_string(lo) + " to " + std::to_string(hi));
  return static_cast<int64_t>(x);
}

std::string text(const json& j, const std::string& field) {
  const json& v = j.at(field);
  if (!v.is_string()) bad(field, "is " + type_name(v) + ", not a string");
  return v.get<std::string>();
}

bool present(const json& j, const char* field) { return j.contains(field) && !j.at(field).is_null(); }

}  // namespace

std::string ApiError::body() const {
  return json{{"error", {{"message", what()}, {"type", type}, {"param", param.empty() ? json() : json(param)},
                         {"code", json()}}}}
      .dump();
}

CompletionRequest parse_completion_request(const std::string& body, bool chat) {
  json j;
  try {
    j = json::parse(body);
  } catch (const json::parse_error& e) {
    throw ApiError(400, std::string("the body is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw ApiError(400, "the body is " + type_name(j) + ", not a JSON object");
  CompletionRequest r;
  r.chat = chat;
  if (!present(j, "model")) bad("model", "is required");
  r.model = text(j, "model");
  if (chat) {
    if (!present(j, "messages")) bad("messages", "is required");
    const json& ms = j.at("messages");
    if (!ms.is_array() || ms.empty()) bad("messages", "is " + type_name(ms) + ", not a non-empty array");
    for (size_t i = 0; i < ms.size(); ++i) {
      const std::string at = "messages[" + std::to_string(i) + "]";
      if (!ms[i].is_object()) bad(at, "is " + type_name(ms[i]) + ", not an object");
      if (!present(ms[i], "role")) bad(at + ".role", "is required");
      const std::string role = text(ms[i], "role");
      if (role != "system" && role != "user" && role != "assistant" && role != "developer")
        throw ApiError(400, "'" + at + ".role' is \"" + role + "\": allowed: system, developer, user, assistant",
                       at + ".role");
      std::string content;
      if (present(ms[i], "content")) {
        const json& c = ms[i].at("content");
        if (c.is_string()) {
          content = c.get<std::string>();
        } else if (c.is_array()) {  // content parts: text only
          for (const json& part : c) {
            if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
              bad(at + ".content", "holds a part that is not {\"type\": \"text\", \"text\": ...}: only text is served");
            content += part["text"].get<std::string>();
          }
        } else {
          bad(at + ".content", "is " + type_name(c) + ", not a string or an array of text parts");
        }
      }
      r.messages.push_back({role == "developer" ? "system" : role, content});
    }
  } else {
    if (!present(j, "prompt")) bad("prompt", "is required");
    const json& p = j.at("prompt");
    if (p.is_array() && p.size() == 1 && p[0].is_string()) r.prompt = p[0].get<std::string>();
    else if (p.is_string()) r.prompt = p.get<std::string>();
    else bad("prompt", "is " + type_name(p) + ": a string (or a list of one string) is served");
  }
  const char* max_field = chat && present(j, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  if (present(j, max_field)) {
    r.max_tokens = integer(j, max_field, 1, std::numeric_limits<int32_t>::max());
    r.max_tokens_field = max_field;
  }
  if (present(j, "temperature")) r.temperature = number(j, "temperature", 0.0, 2.0);
  if (present(j, "top_p")) r.top_p = number(j, "top_p", 0.0, 1.0);
  if (r.top_p == 0.0) bad("top_p", "is 0: allowed: greater than 0, at most 1");
  if (present(j, "top_k")) r.top_k = integer(j, "top_k", -1, std::numeric_limits<int32_t>::max());
  if (r.top_k < 0) r.top_k = 0;  // vLLM's -1: every token
  if (present(j, "repetition_penalty")) r.repetition_penalty = number(j, "repetition_penalty", 1e-3, 100.0);
  if (present(j, "seed")) r.seed = static_cast<uint64_t>(integer(j, "seed", std::numeric_limits<int64_t>::min() / 2,
                                                                  std::numeric_limits<int64_t>::max() / 2));
  if (present(j, "n") && integer(j, "n", 1, 1) != 1) bad("n", "must be 1");
  if (present(j, "stream")) {
    if (!j.at("stream").is_boolean()) bad("stream", "is " + type_name(j.at("stream")) + ", not a boolean");
    r.stream = j.at("stream").get<bool>();
  }
  if (present(j, "stream_options")) {
    const json& o = j.at("stream_options");
    if (!o.is_object()) bad("stream_options", "is " + type_name(o) + ", not an object");
    if (present(o, "include_usage")) {
      if (!o.at("include_usage").is_boolean()) bad("stream_options.include_usage", "is not a boolean");
      r.include_usage = o.at("include_usage").get<bool>();
    }
  }
  if (present(j, "stop")) {
    const json& s = j.at("stop");
    if (s.is_string()) r.stop.push_back(s.get<std::string>());
    else if (s.is_array() && s.size() <= 4 && std::all_of(s.begin(), s.end(), [](const json& x) { return x.is_string(); }))
      for (const json& x : s) r.stop.push_back(x.get<std::string>());
    else bad("stop", "is " + type_name(s) + ": a string or an array of at most 4 strings");
    for (const std::string& x : r.stop)
      if (x.empty()) bad("stop", "holds an empty string");
  }
  return r;
}

nlohmann::json completion_response(const CompletionRequest& r, const std::string& id, int64_t created,
                                   const std::string& text, const std::string& finish_reason, const Usage& usage) {
  json choice = {{"index", 0}, {"finish_reason", finish_reason}, {"logprobs", json()}};
  if (r.chat) choice["message"] = {{"role", "assistant"}, {"content", text}};
  else choice["text"] = text;
  return {{"id", id},
          {"object", r.chat ? "chat.completion" : "text_completion"},
          {"created", created},
          {"model", r.model},
          {"choices", json::array({choice})},
          {"usage",
           {{"prompt_tokens", usage.prompt_tokens},
            {"completion_tokens", usage.completion_tokens},
            {"total_tokens", usage.prompt_tokens + usage.completion_tokens}}}};
}

nlohmann::json completion_chunk(const CompletionRequest& r, const std::string& id, int64_t created,
                                const std::string& delta, const std::optional<std::string>& finish_reason, bool first) {
  json choice = {{"index", 0}, {"finish_reason", finish_reason ? json(*finish_reason) : json()}, {"logprobs", json()}};
  if (r.chat) {
    json d = json::object();
    if (first) d["role"] = "assistant";
    if (!delta.empty() || (first && !finish_reason)) d["content"] = delta;
    choice["delta"] = d;
  } else {
    choice["text"] = delta;
  }
  return {{"id", id},
          {"object", r.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", created},
          {"model", r.model},
          {"choices", json::array({choice})}};
}

}  // namespace trident::serve
