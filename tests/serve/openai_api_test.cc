// OpenAI's request fields as `trident serve` reads them (serve/openai_api.h): defaults, the
// fields that are checked and the errors that name them; and the text of a stream as tokens
// arrive (serve/text_stream.h): no broken UTF-8 character and no part of a stop string is sent
// before it is decided.
#include <gtest/gtest.h>

#include "data/byte_tokenizer.h"
#include "serve/openai_api.h"
#include "serve/text_stream.h"

namespace trident::serve {
namespace {

std::string error_of(const std::string& body, bool chat = false) {
  try {
    parse_completion_request(body, chat);
  } catch (const ApiError& e) {
    return std::to_string(e.status) + " " + e.param + ": " + e.what();
  }
  return "";
}

TEST(OpenAiApi, ReadsACompletionRequest) {
  const CompletionRequest r = parse_completion_request(
      R"({"model": "m", "prompt": "hi", "max_tokens": 5, "temperature": 0, "stop": "\n", "seed": 3,
          "stream": true, "user": "ignored", "logit_bias": {}})",
      false);
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.prompt, "hi");
  EXPECT_EQ(*r.max_tokens, 5);
  EXPECT_EQ(r.temperature, 0.0);
  EXPECT_EQ(r.stop, std::vector<std::string>{"\n"});
  EXPECT_EQ(*r.seed, 3u);
  EXPECT_TRUE(r.stream);
  const CompletionRequest d = parse_completion_request(R"({"model": "m", "prompt": ["x"]})", false);
  EXPECT_FALSE(d.max_tokens);
  EXPECT_EQ(d.temperature, 1.0);  // OpenAI's default
}

TEST(OpenAiApi, ReadsAChatRequestWithTextParts) {
  const CompletionRequest r = parse_completion_request(
      R"({"model": "m", "messages": [{"role": "developer", "content": "be brief"},
          {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
          "max_completion_tokens": 7})",
      true);
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "ab");
  EXPECT_EQ(*r.max_tokens, 7);
  EXPECT_EQ(r.max_tokens_field, "max_completion_tokens");
  // A chat request's max_tokens (the older name) is named as itself in errors about it (it
  // was named max_completion_tokens).
  const CompletionRequest old = parse_completion_request(R"({"model": "m", "messages": [{"role": "user"}], "max_tokens": 4})", true);
  EXPECT_EQ(*old.max_tokens, 4);
  EXPECT_EQ(old.max_tokens_field, "max_tokens");
}

TEST(OpenAiApi, BadFieldsAreNamed) {
  EXPECT_NE(error_of("{oops").find("400 : the body is not valid JSON"), std::string::npos);
  EXPECT_NE(error_of("[1]").find("not a JSON object"), std::string::npos);
  EXPECT_EQ(error_of(R"({"prompt": "x"})"), "400 model: 'model' is required");
  EXPECT_EQ(error_of(R"({"model": "m", "prompt": 3})"), "400 prompt: 'prompt' is a number: a string (or a list of one string) is served");
  EXPECT_EQ(error_of(R"({"model": "m", "prompt": "x", "temperature": "hot"})"),
            "400 temperature: 'temperature' is a string, not a number");
  EXPECT_EQ(error_of(R"({"model": "m", "prompt": "x", "temperature": 3})"),
            "400 temperature: 'temperature' is 3: allowed: 0.0 to 2.0");
  EXPECT_EQ(error_of(R"({"model": "m", "prompt": "x", "max_tokens": 1.5})"),
            "400 max_tokens: 'max_tokens' is 1.5, not an integer");
  EXPECT_EQ(error_of(R"({"model": "m", "prompt": "x", "max_tokens": 0})"),
            "400 max_tokens: 'max_tokens' is 0: allowed: 1 to 2147483647");
  EXPECT_EQ(error_of(R"({"model": "m", "prompt": "x", "n": 2})"), "400 n: 'n' is 2: allowed: 1 to 1");
  EXPECT_EQ(error_of(R"({"model": "m", "prompt": "x", "stop": ["a", "b", "c", "d", "e"]})"),
            "400 stop: 'stop' is an array: a string or an array of at most 4 strings");
  EXPECT_EQ(error_of(R"({"model": "m", "prompt": "x", "stream": "yes"})"), "400 stream: 'stream' is a string, not a boolean");
  EXPECT_EQ(error_of(R"({"model": "m", "messages": []})", true), "400 messages: 'messages' is an array, not a non-empty array");
  EXPECT_EQ(error_of(R"({"model": "m", "messages": [{"role": "robot", "content": "x"}]})", true),
            "400 messages[0].role: 'messages[0].role' is \"robot\": allowed: system, developer, user, assistant");
  EXPECT_EQ(error_of(R"({"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", true),
            "400 messages[0].content: 'messages[0].content' holds a part that is not {\"type\": \"text\", \"text\": ...}: "
            "only text is served");
}

TEST(TextStream, HoldsBackBrokenCharactersAndStopStringPrefixes) {
  const data::ByteTokenizer bytes;
  TextStream s(bytes, {"END"});
  std::string sent;
  for (unsigned char c : std::string("h\xC3\xA9 E")) {
    const std::string piece = s.add(c);
    EXPECT_EQ(complete_utf8_prefix(piece), piece.size()) << "a broken character was sent";
    sent += piece;
  }
  EXPECT_EQ(sent, "h\xC3\xA9 ");  // "E" may start "END": held back
  sent += s.add('X');
  EXPECT_EQ(sent, "h\xC3\xA9 EX");  // decided: not the stop string
  sent += s.add('E');
  sent += s.add('N');
  EXPECT_EQ(sent, "h\xC3\xA9 EX");
  sent += s.add('D');
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(sent, "h\xC3\xA9 EX");
  EXPECT_EQ(s.add('z'), "");
}

TEST(TextStream, FinishSendsTheRest) {
  const data::ByteTokenizer bytes;
  TextStream s(bytes, {"END"});
  EXPECT_EQ(s.add('E'), "");
  EXPECT_EQ(s.finish(), "E");
  EXPECT_EQ(complete_utf8_prefix("a\xE2\x82"), 1u);
  EXPECT_EQ(complete_utf8_prefix("a\xE2\x82\xAC"), 4u);
}

}  // namespace
}  // namespace trident::serve
