#include "data/chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/check.h"

namespace trident::data {
namespace {

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

}  // namespace

const std::vector<std::string>& chat_template_names() {
  static const std::vector<std::string> names = {"llama3", "chatml", "plain"};
  return names;
}

std::vector<ChatPiece> render_chat(const std::string& name, const std::vector<ChatMessage>& messages) {
  std::vector<ChatPiece> out;
  auto markup = [&](std::string text, bool trains = false) { out.push_back({std::move(text), trains, true, false}); };
  auto content = [&](std::string text, bool trains) { out.push_back({std::move(text), trains, false, false}); };
  if (name == "llama3") {
    markup("<|begin_of_text|>");
    for (const ChatMessage& m : messages) {
      const bool a = m.role == "assistant";
      markup("<|start_header_id|>" + m.role + "<|end_header_id|>\n\n");
      content(trim(m.content), a);
      markup("<|eot_id|>", a);
    }
  } else if (name == "chatml") {
    for (const ChatMessage& m : messages) {
      const bool a = m.role == "assistant";
      markup("<|im_start|>" + m.role + "\n");
      content(m.content, a);
      markup("<|im_end|>", a);
      markup("\n");
    }
  } else if (name == "plain") {
    for (const ChatMessage& m : messages) {
      const bool a = m.role == "assistant";
      content("### " + m.role + "\n", false);
      content(m.content + "\n\n", a);
      if (a) out.push_back({"", true, false, true});
    }
  } else {
    std::string known;
    for (const std::string& n : chat_template_names()) known += (known.empty() ? "" : ", ") + n;
    TRI_CHECK(false, "no chat template '", name, "' (trident ships: ", known, ")");
  }
  return out;
}

GenerationPrompt generation_prompt(const std::string& name) {
  if (name == "llama3") return {{{"<|start_header_id|>assistant<|end_header_id|>\n\n", false, true, false}}, "<|eot_id|>"};
  if (name == "chatml") return {{{"<|im_start|>assistant\n", false, true, false}}, "<|im_end|>"};
  render_chat(name, {});  // an unknown name: its error
  return {{{"### assistant\n", false, false, false}}, ""};
}

std::string rendered_text(const std::vector<ChatPiece>& pieces, const std::string& eot_text) {
  std::string s;
  for (const ChatPiece& p : pieces) s += p.end_of_text ? eot_text : p.text;
  return s;
}

StatusOr<std::optional<std::string>> chat_template_of_model_dir(const std::string& dir) {
  const std::filesystem::path path = std::filesystem::path(dir) / "tokenizer_config.json";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::optional<std::string>();
  std::ifstream in(path);
  std::stringstream buf;
  buf << in.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(buf.str());
  } catch (const std::exception& e) {
    return Status::invalid(path.string() + ": not JSON: " + e.what());
  }
  if (!j.is_object() || !j.contains("chat_template")) return std::optional<std::string>();
  std::string t;
  if (j["chat_template"].is_string()) {
    t = j["chat_template"].get<std::string>();
  } else if (j["chat_template"].is_array()) {  // named templates: the "default" one
    for (const auto& e : j["chat_template"])
      if (e.is_object() && e.value("name", "") == "default" && e.contains("template") && e["template"].is_string())
        t = e["template"].get<std::string>();
  }
  if (t.find("<|start_header_id|>") != std::string::npos) return std::optional<std::string>("llama3");
  if (t.find("<|im_start|>") != std::string::npos) return std::optional<std::string>("chatml");
  return Status::invalid(path.string() + ": its chat_template is not one trident ships (llama3's " +
                         "<|start_header_id|> or ChatML's <|im_start|>): name one with --chat-template (" +
                         "llama3, chatml, plain)");
}

}  // namespace trident::data
