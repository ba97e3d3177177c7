// Chat templates: how a conversation ({role, content} messages) becomes the text a model was
// tuned on, and which of it is trained on. Hugging Face keeps a Jinja template in
// tokenizer_config.json; trident ships the exact renderings of the families it has instead of
// a Jinja interpreter, and says which:
//   llama3  Llama 3 / 3.1 instruct: <|begin_of_text|> then per message
//           <|start_header_id|>ROLE<|end_header_id|>\n\n + content (trimmed) + <|eot_id|>
//           (HF's template without a generation prompt or tools; no default system message)
//   chatml  Qwen2 / ChatML: per message <|im_start|>ROLE\n + content + <|im_end|>\n
//           (no default system message: Qwen2-Instruct's template adds "You are a helpful
//           assistant." when a conversation has none; give it as a system message to match)
//   plain   tokenizers without chat tokens (byte, GPT-2): per message "### ROLE\n" + content +
//           "\n\n", the assistant's turn ending with the tokenizer's end-of-text token when it
//           has one (GPT-2's <|endoftext|>)
// What trains: every assistant message's content and its end of turn (<|eot_id|>, <|im_end|>,
// "\n\n" / end-of-text), never the headers, system or user messages (torchtune's and TRL's
// assistant-only loss).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace trident::data {

struct ChatMessage {
  std::string role;  // system, user, assistant
  std::string content;
};

// A piece of rendered text: `special` pieces are the template's own markup (encoded with
// special tokens allowed), the others a message's content (special-token text in it stays text).
struct ChatPiece {
  std::string text;
  bool trains = false;
  bool special = false;
  bool end_of_text = false;  // stands for the tokenizer's end-of-text id (text is empty)
};

// The templates trident ships, by name.
const std::vector<std::string>& chat_template_names();
// Renders `messages` with template `name` (one of chat_template_names()).
std::vector<ChatPiece> render_chat(const std::string& name, const std::vector<ChatMessage>& messages);
// What follows the messages when the model is to answer (Hugging Face's add_generation_prompt):
// the assistant's header, and the markup that ends its turn (llama3: <|eot_id|>; chatml:
// <|im_end|>; plain: none, the tokenizer's end-of-text token ends it).
struct GenerationPrompt {
  std::vector<ChatPiece> header;
  std::string end_of_turn;  // special-token text; empty: the end-of-text token
};
GenerationPrompt generation_prompt(const std::string& name);

// The whole rendered text (end_of_text pieces as `eot_text`), for fixtures and messages.
std::string rendered_text(const std::vector<ChatPiece>& pieces, const std::string& eot_text = "");

// The template of a model directory: its tokenizer_config.json's chat_template, recognised by
// its markup (<|start_header_id|>: llama3; <|im_start|>: chatml). nullopt when `dir` has no
// tokenizer_config.json or no chat_template; an error when it has one trident does not ship.
StatusOr<std::optional<std::string>> chat_template_of_model_dir(const std::string& dir);

}  // namespace trident::data
