// Fuzzes tiktoken rank files (data/tiktoken_ranks.h): the input is a file of "BASE64 RANK"
// lines. An accepted vocabulary must make a tokenizer that encodes and decodes text.
#include <vector>

#include "core/check.h"
#include "data/tiktoken_ranks.h"
#include "fuzz_util.h"

using namespace trident;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto vocab = data::parse_tiktoken_ranks(fuzz::as_text(data, size), "fuzz.tiktoken");
  if (!vocab.is_ok()) return 0;
  data::ByteLevelBpeOptions options;
  options.pattern = data::SplitPattern::kCl100k;
  options.kind = "fuzz";
  data::ByteLevelBpeTokenizer tok(vocab.value(), options);
  const std::string text = "Hello, world! 12345 \xc3\xa9t\xc3\xa9  \n\n x";
  const std::vector<data::TokenId> ids = tok.encode(text);
  if (tok.decode(ids) != text) fuzz::fail("encode then decode does not give the text back");
  return 0;
}
