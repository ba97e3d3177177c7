// Fuzzes Hugging Face tokenizer.json files (data/hf_tokenizer_json.h): the input is the
// tokenizer.json, then optionally a NUL and the tokenizer_config.json beside it. An accepted
// tokenizer must encode and decode text.
#include <vector>

#include "core/check.h"
#include "data/hf_tokenizer_json.h"
#include "fuzz_util.h"

using namespace trident;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto [json, config] = fuzz::split_at_nul(data, size);
  auto tok = data::parse_hf_tokenizer_json(json, "fuzz/tokenizer.json", config);
  if (!tok.is_ok()) return 0;
  const std::string text = "Hello, world! 12345 \xc3\xa9t\xc3\xa9  \n\n x<|endoftext|>";
  const std::vector<data::TokenId> ids = tok.value()->encode(text, /*allow_special=*/true);
  (void)tok.value()->decode(ids);
  if (tok.value()->decode(tok.value()->encode(text, false)) != text)
    fuzz::fail("encode then decode does not give the text back");
  return 0;
}
