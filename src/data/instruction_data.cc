#include "data/instruction_data.h"

#include <fstream>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "data/chat_template.h"

namespace trident::data {
namespace {

// Appends `text` encoded, each id with mask bit `trains`.
void append(const Tokenizer& tok, const std::string& text, bool special, bool trains, InstructionTokens& out) {
  const size_t before = out.ids.size();
  tok.encode_append(text, special, out.ids);
  out.mask.resize(out.ids.size(), 0);
  for (size_t i = before; i < out.ids.size(); ++i) out.mask[i] = trains ? 1 : 0;
}

}  // namespace

StatusOr<InstructionTokens> tokenize_instruction_files(const Tokenizer& tok,
                                                       const std::vector<std::filesystem::path>& files,
                                                       const std::string& chat_template) {
  InstructionTokens out;
  for (const std::filesystem::path& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) return Status::io_error("cannot open input " + file.string());
    std::string line;
    for (int64_t n = 1; std::getline(in, line); ++n) {
      out.bytes += static_cast<int64_t>(line.size()) + 1;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      const std::string where = file.string() + ":" + std::to_string(n);
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(line);
      } catch (const std::exception& e) {
        return Status::invalid(where + ": not a JSON object (" + e.what() + ")");
      }
      if (!j.is_object()) return Status::invalid(where + ": not a JSON object (an example is {\"prompt\", \"completion\"} or {\"messages\"})");
      auto field = [&](const nlohmann::json& obj, const char* key, const std::string& at) -> StatusOr<std::string> {
        if (!obj.contains(key)) return Status::invalid(where + ": " + at + "has no \"" + key + "\"");
        if (!obj[key].is_string())
          return Status::invalid(where + ": " + at + "\"" + key + "\" is " + obj[key].dump() + ", not a string");
        return obj[key].get<std::string>();
      };
      const size_t start = out.ids.size();
      try {
        if (j.contains("messages")) {
          const auto& ms = j["messages"];
          if (!ms.is_array() || ms.empty())
            return Status::invalid(where + ": \"messages\" is " + ms.dump().substr(0, 80) + ", not a non-empty list");
          std::vector<ChatMessage> messages;
          bool any_assistant = false;
          for (size_t i = 0; i < ms.size(); ++i) {
            const std::string at = "messages[" + std::to_string(i) + "] ";
            if (!ms[i].is_object()) return Status::invalid(where + ": " + at + "is not an object");
            auto role = field(ms[i], "role", at);
            if (!role.is_ok()) return role.status();
            auto content = field(ms[i], "content", at);
            if (!content.is_ok()) return content.status();
            if (role.value() != "system" && role.value() != "user" && role.value() != "assistant")
              return Status::invalid(where + ": " + at + "\"role\" is \"" + role.value() +
                                     "\": allowed: system, user, assistant");
            any_assistant = any_assistant || role.value() == "assistant";
            messages.push_back({role.value(), content.value()});
          }
          if (!any_assistant)
            return Status::invalid(where + ": \"messages\" has no assistant message: nothing to train on");
          for (const ChatPiece& p : render_chat(chat_template, messages)) {
            if (p.end_of_text) {
              if (tok.eot_id()) {
                out.ids.push_back(*tok.eot_id());
                out.mask.push_back(1);
              }
            } else {
              append(tok, p.text, p.special, p.trains, out);
            }
          }
        } else if (j.contains("prompt") || j.contains("completion")) {
          auto prompt = field(j, "prompt", "the example ");
          if (!prompt.is_ok()) return prompt.status();
          auto completion = field(j, "completion", "the example ");
          if (!completion.is_ok()) return completion.status();
          if (completion.value().empty()) return Status::invalid(where + ": \"completion\" is empty: nothing to train on");
          append(tok, prompt.value(), false, false, out);
          append(tok, completion.value(), false, true, out);
          if (tok.eot_id()) {
            out.ids.push_back(*tok.eot_id());
            out.mask.push_back(1);
          }
        } else {
          return Status::invalid(where + ": neither \"messages\" nor \"prompt\" and \"completion\" (keys: " +
                                 j.dump().substr(0, 80) + ")");
        }
      } catch (const Error& e) {
        return Status::invalid(where + ": " + e.message());
      }
      if (out.ids.size() == start) return Status::invalid(where + ": the example has no tokens");
      out.example_ends.push_back(static_cast<int64_t>(out.ids.size()));
    }
    if (in.bad()) return Status::io_error("cannot read input " + file.string());
  }
  if (out.ids.empty()) return Status::invalid("the JSONL inputs hold no example: nothing to prepare");
  return out;
}

}  // namespace trident::data
