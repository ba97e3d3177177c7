// Fuzzes GPT-2's vocabulary files (data/gpt2_vocab.h): the input is vocab.json, a NUL, then
// merges.txt. An accepted vocabulary must make a tokenizer that encodes and decodes text.
#include <vector>

#include "core/check.h"
#include "data/byte_level_bpe_tokenizer.h"
#include "data/gpt2_vocab.h"
#include "fuzz_util.h"

using namespace trident;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto [vocab_json, merges] = fuzz::split_at_nul(data, size);
  auto vocab = data::parse_gpt2_vocab(vocab_json, "fuzz/vocab.json", merges, "fuzz/merges.txt");
  if (!vocab.is_ok()) return 0;
  data::ByteLevelBpeTokenizer tok(vocab.value(), data::ByteLevelBpeOptions{});
  const std::string text = "Hello, world! 12345 \xc3\xa9t\xc3\xa9  \n\n x<|endoftext|>";
  (void)tok.decode(tok.encode(text, /*allow_special=*/true));
  if (tok.decode(tok.encode(text, false)) != text) fuzz::fail("encode then decode does not give the text back");
  return 0;
}
