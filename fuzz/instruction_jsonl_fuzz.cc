// Fuzzes instruction and chat data (data/instruction_data.h): the input's first byte picks the
// chat template, the rest is a .jsonl file. An accepted file promises one mask bit per token,
// examples that end in order at the stream's end, and a mask that trains on something.
#include "data/byte_tokenizer.h"
#include "data/chat_template.h"
#include "data/instruction_data.h"
#include "fuzz_util.h"

using namespace trident;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::vector<std::string>& templates = data::chat_template_names();
  const std::string& chat = templates[data[0] % templates.size()];
  const std::string path = fuzz::write_scratch_file("data.jsonl", fuzz::as_text(data + 1, size - 1));
  data::ByteTokenizer tok;
  auto r = data::tokenize_instruction_files(tok, {path}, chat);
  if (!r.is_ok()) return 0;
  const data::InstructionTokens& t = r.value();
  if (t.ids.size() != t.mask.size()) fuzz::fail("a mask bit per token");
  if (t.example_ends.empty() || t.example_ends.back() != static_cast<int64_t>(t.ids.size()))
    fuzz::fail("the last example ends at the stream's end");
  for (size_t i = 1; i < t.example_ends.size(); ++i)
    if (t.example_ends[i] <= t.example_ends[i - 1]) fuzz::fail("examples end in order, each non-empty");
  bool trains = false;
  for (uint8_t b : t.mask) trains = trains || b == 1;
  if (!trains) fuzz::fail("an accepted example trains on something");
  return 0;
}
