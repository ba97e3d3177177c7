// Hugging Face tokenizer.json: a small hand-made file (tests/data/hf_tokenizer/tokenizer.json),
// the same ids as the GPT-2 tokenizer from a tokenizer.json of GPT-2's files, tiktoken's ids
// from a tokenizer.json converted from cl100k_base as Hugging Face's converter does, and the
// errors that name the file and the field.
#include "data/hf_tokenizer_json.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "data/byte_unicode.h"
#include "data/test_data.h"
#include "data/tiktoken_ranks.h"

namespace trident::data {
namespace {

using Json = nlohmann::json;
using testing::escaped;

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

testing::fs::path tiny_file() {
  return testing::fs::path(__FILE__).parent_path() / "hf_tokenizer" / "tokenizer.json";
}

Json tiny_json() {
  return Json::parse(testing::read_file(tiny_file()));
}

// The error parsing `json` gives, or "(no error)".
std::string error_of(const Json& json) {
  auto parsed = parse_hf_tokenizer_json(json.dump(), "t/tokenizer.json");
  return parsed.is_ok() ? std::string("(no error)") : parsed.status().message();
}

TEST(HfTokenizerJson, TheTinyFileEncodesByTiktokensRule) {
  auto loaded = load_hf_tokenizer_json(tiny_file());
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  const ByteLevelBpeTokenizer& tok = *loaded.value();
  EXPECT_EQ(tok.vocab_size(), 266);
  EXPECT_EQ(tok.pattern(), SplitPattern::kCl100k);
  EXPECT_EQ(tok.eot_id(), std::optional<TokenId>(264));
  EXPECT_EQ(tok.bos_id(), std::nullopt);
  // hello: h+e, l+l, he+ll, hell+o; " world": " "+w, o+r, " w"+or, l+d.
  EXPECT_EQ(tok.encode("hello world<|endoftext|>", true),
            (std::vector<TokenId>{259, 262, 263, 264}));
  EXPECT_EQ(
      tok.encode("<|endoftext|>", false),
      (std::vector<TokenId>{'<', '|', 'e', 'n', 'd', 'o', 'f', 't', 'e', 'x', 't', '|', '>'}));
  EXPECT_EQ(tok.encode("HELLO'S", false),
            (std::vector<TokenId>{'H', 'E', 'L', 'L', 'O', '\'', 'S'}));
  // An added token that is not in model.vocab gets its id too.
  EXPECT_EQ(tok.encode("<|im_end|>x", true), (std::vector<TokenId>{265, 'x'}));
  EXPECT_EQ(tok.decode(std::vector<TokenId>{259, 262, 263, 264, 265}),
            "hello world<|endoftext|><|im_end|>");
  EXPECT_EQ(tok.name(), "tokenizer.json (" + tiny_file().string() + ")");
}

TEST(HfTokenizerJson, MergesMayBeStringsAndTheEosComesFromTokenizerConfig) {
  Json json = tiny_json();
  for (Json& m : json["model"]["merges"])
    m = m[0].get<std::string>() + " " + m[1].get<std::string>();
  auto parsed =
      parse_hf_tokenizer_json(json.dump(), "t.json", R"({"eos_token": {"content": "<|im_end|>"}})");
  ASSERT_TRUE(parsed.is_ok()) << parsed.status().to_string();
  EXPECT_EQ(parsed.value()->encode("hello world", false), (std::vector<TokenId>{259, 262, 263}));
  EXPECT_EQ(parsed.value()->eot_id(), std::optional<TokenId>(265));
}

TEST(HfTokenizerJson, UnsupportedFeaturesNameTheFileAndTheField) {
  auto with = [](const std::function<void(Json&)>& edit) {
    Json json = tiny_json();
    edit(json);
    return error_of(json);
  };
  EXPECT_EQ(with([](Json&) {}), "(no error)");
  EXPECT_CONTAINS(with([](Json& j) { j["model"]["type"] = "Unigram"; }),
                  "t/tokenizer.json: model.type: \"Unigram\" is not supported");
  EXPECT_CONTAINS(with([](Json& j) { j["model"]["byte_fallback"] = true; }),
                  "t/tokenizer.json: model.byte_fallback: true is not supported");
  EXPECT_CONTAINS(with([](Json& j) { j["model"]["continuing_subword_prefix"] = "##"; }),
                  "model.continuing_subword_prefix: \"##\" is not supported");
  EXPECT_CONTAINS(with([](Json& j) { j["model"]["dropout"] = 0.1; }),
                  "model.dropout: 0.1 is not supported");
  EXPECT_CONTAINS(
      with([](Json& j) {
        j["normalizer"] = Json{{"type", "NFC"}};
      }),
      "t/tokenizer.json: normalizer: {\"type\":\"NFC\"} is not supported (allowed: null");
  EXPECT_CONTAINS(
      with([](Json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\w+"; }),
      "pre_tokenizer.pretokenizers[0].pattern.Regex: \"\\\\w+\" is not supported (allowed: the "
      "split patterns of tiktoken's gpt2, cl100k_base");
  EXPECT_CONTAINS(
      with([](Json& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed"; }),
      "pre_tokenizer.pretokenizers[0].behavior: \"Removed\" is not supported");
  EXPECT_CONTAINS(
      with([](Json& j) {
        j["pre_tokenizer"] = Json{{"type", "Whitespace"}};
      }),
      "pre_tokenizer.type: \"Whitespace\" is not supported (allowed: ByteLevel, Sequence)");
  EXPECT_CONTAINS(with([](Json& j) {
                    j["pre_tokenizer"] = Json{{"type", "ByteLevel"}, {"add_prefix_space", true}};
                  }),
                  "pre_tokenizer.add_prefix_space: true is not supported");
  EXPECT_CONTAINS(with([](Json& j) { j["decoder"] = Json{{"type", "WordPiece"}}; }), "decoder: ");
  EXPECT_CONTAINS(with([](Json& j) { j["added_tokens"][1]["lstrip"] = true; }),
                  "added_tokens[1].lstrip: true is not supported for \"<|im_end|>\"");
  EXPECT_CONTAINS(with([](Json& j) { j["added_tokens"][0]["id"] = 7; }),
                  "added_tokens[0]: \"<|endoftext|>\" has id 7, but model.vocab gives it 264");
  EXPECT_CONTAINS(with([](Json& j) { j["model"]["merges"][2] = "hell"; }),
                  "model.merges[2]: expected \"LEFT RIGHT\"");
  EXPECT_CONTAINS(with([](Json& j) {
                    j["model"]["merges"][2] = Json::array({"he", "lq"});
                  }),
                  "t/tokenizer.json: model.merges[2]: the merge \"he\" + \"lq\" names \"lq\"");
  // (Without ignore_merges: with it, a token no merge makes is produced as a whole piece.)
  EXPECT_CONTAINS(
      with([](Json& j) {
        j["model"]["vocab"]["##ing"] = 266;
        j["model"]["ignore_merges"] = false;
      }),
      "t/tokenizer.json: model.vocab[\"##ing\"]: the token \"##ing\" (id 266) is neither a byte, "
      "the result of a merge in t/tokenizer.json, nor one of its added_tokens");
  EXPECT_CONTAINS(with([](Json& j) { j["model"]["vocab"]["x"] = -3; }),
                  "model.vocab[\"x\"]: the id must be");
  EXPECT_CONTAINS(with([](Json& j) { j.erase("model"); }), "t/tokenizer.json: model: missing");
  // Ids are bounded by the vocabulary present (a few unused ids for special tokens), read whole
  // before narrowing: 10^9 made a table of 10^9 ids (std::bad_alloc), 2^32 + 265 was 265.
  EXPECT_EQ(with([](Json& j) { j["added_tokens"][1]["id"] = 300; }), "(no error)");
  EXPECT_CONTAINS(with([](Json& j) { j["added_tokens"][1]["id"] = 1000000000; }),
                  "t/tokenizer.json: added_tokens[1]: the id 1000000000 of \"<|im_end|>\" is out of range: a "
                  "vocabulary of 266 tokens must use ids below 1290 (0..265, special tokens leaving at most 1024 "
                  "unused)");
  EXPECT_CONTAINS(with([](Json& j) { j["model"]["vocab"]["x"] = 2147483647; }),
                  "model.vocab[\"x\"]: the id 2147483647 of \"x\" is out of range");
  EXPECT_CONTAINS(with([](Json& j) { j["added_tokens"][1]["id"] = (uint64_t{1} << 32) + 265; }),
                  "t/tokenizer.json: added_tokens[1].id: the id of \"<|im_end|>\" must be a non-negative integer "
                  "below 2^31, found 4294967561");
  EXPECT_CONTAINS(with([](Json& j) { j["added_tokens"][0]["id"] = uint64_t{1000000000000}; }),
                  "added_tokens[0].id: the id of \"<|endoftext|>\" must be a non-negative integer below 2^31, found "
                  "1000000000000");
  auto bad_json = parse_hf_tokenizer_json("{\n  \"model\": [1,\n}", "t/tokenizer.json");
  ASSERT_FALSE(bad_json.is_ok());
  EXPECT_CONTAINS(bad_json.status().message(), "t/tokenizer.json:3:1: not valid JSON");
  // A number past a double is an error, not an escaping exception (found by fuzz/hf_tokenizer_json_fuzz;
  // fuzz/corpus/hf_tokenizer_json_fuzz/crash_number_overflow).
  auto huge = parse_hf_tokenizer_json("2E+5451", "t/tokenizer.json");
  ASSERT_FALSE(huge.is_ok());
  EXPECT_CONTAINS(huge.status().message(), "t/tokenizer.json: not valid JSON: ");
  EXPECT_CONTAINS(huge.status().message(), "number overflow parsing '2E+5451' (numbers must fit in a double)");
}

// GPT-2's tokenizer.json as Hugging Face writes it, from GPT-2's files.
Json gpt2_tokenizer_json(const testing::fs::path& dir) {
  const bool hf = testing::fs::exists(dir / "vocab.json");
  Json vocab = Json::parse(testing::read_file(dir / (hf ? "vocab.json" : "encoder.json")));
  Json merges = Json::array();
  const std::string merges_txt = testing::read_file(dir / (hf ? "merges.txt" : "vocab.bpe"));
  for (size_t pos = 0, end; pos < merges_txt.size(); pos = end + 1) {
    end = merges_txt.find('\n', pos);
    if (end == std::string::npos) end = merges_txt.size();
    const std::string line = merges_txt.substr(pos, end - pos);
    if (!line.empty() && !line.starts_with("#version")) merges.push_back(line);
  }
  Json json;
  json["added_tokens"] = Json::array({Json{{"id", 50256},
                                           {"content", "<|endoftext|>"},
                                           {"special", true},
                                           {"lstrip", false},
                                           {"rstrip", false},
                                           {"single_word", false}}});
  json["normalizer"] = nullptr;
  json["pre_tokenizer"] =
      Json{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  json["decoder"] = Json{{"type", "ByteLevel"}};
  json["model"] = Json{{"type", "BPE"},
                       {"dropout", nullptr},
                       {"unk_token", nullptr},
                       {"continuing_subword_prefix", ""},
                       {"end_of_word_suffix", ""},
                       {"fuse_unk", false},
                       {"byte_fallback", false},
                       {"vocab", vocab},
                       {"merges", merges}};
  return json;
}

TEST(HfTokenizerJson, Gpt2sTokenizerJsonGivesTheGpt2TokenizersIds) {
  const std::optional<testing::fs::path> dir = testing::find_gpt2_dir();
  const Gpt2Tokenizer* gpt2 = testing::shared_gpt2();
  if (!dir || gpt2 == nullptr) GTEST_SKIP() << testing::gpt2_missing_message();
  auto parsed = parse_hf_tokenizer_json(gpt2_tokenizer_json(*dir).dump(), "gpt2/tokenizer.json");
  ASSERT_TRUE(parsed.is_ok()) << parsed.status().to_string();
  const ByteLevelBpeTokenizer& hf = *parsed.value();
  EXPECT_EQ(hf.vocab_size(), 50257);
  EXPECT_EQ(hf.eot_id(), std::optional<TokenId>(50256));
  for (const char* text :
       {"Hello, world!<|endoftext|>", "I'm DON'T  \n\n 12345 caf\xC3\xA9 \xF0\x9F\x98\x80"})
    for (bool special : {false, true})
      EXPECT_EQ(hf.encode(text, special), gpt2->encode(text, special)) << escaped(text);
  for (const char* file : {"war_and_peace.txt", "shakespeare.txt"}) {
    const std::optional<testing::fs::path> path = testing::find_shared_file(file);
    if (!path) GTEST_SKIP() << file << " not found in ../shared/data";
    const std::string text = testing::read_file(*path);
    const std::vector<TokenId> ids = hf.encode(text);
    EXPECT_TRUE(ids == gpt2->encode(text)) << file;
    EXPECT_GT(ids.size(), text.size() / 5) << file;
  }
}

// A tokenizer.json made from a rank file as Hugging Face's TikTokenConverter makes Llama 3's:
// every split of a token into two tokens of lower rank is a merge, ordered by the token's rank;
// ignore_merges set; the Split regex is tiktoken's pattern.
Json converted_from_ranks(const BpeVocab& ranks, const std::string& regex,
                          const std::vector<std::pair<std::string, TokenId>>& specials) {
  ByteStringMap<TokenId> rank_of(ranks.token_bytes.size());
  for (size_t r = 0; r < ranks.token_bytes.size(); ++r)
    rank_of.insert(ranks.token_bytes[r], static_cast<TokenId>(r));
  Json vocab = Json::object(), merges = Json::array();
  for (size_t r = 0; r < ranks.token_bytes.size(); ++r) {
    const std::string& t = ranks.token_bytes[r];
    vocab[bytes_to_symbols(t)] = r;
    std::vector<std::pair<TokenId, TokenId>> splits;
    for (size_t k = 1; k < t.size(); ++k) {
      const TokenId* left = rank_of.find(std::string_view(t).substr(0, k));
      const TokenId* right = rank_of.find(std::string_view(t).substr(k));
      if (left && right && *left < r && *right < r) splits.emplace_back(*left, *right);
    }
    std::sort(splits.begin(), splits.end());
    for (const auto& [l, rr] : splits)
      merges.push_back(Json::array(
          {bytes_to_symbols(ranks.token_bytes[l]), bytes_to_symbols(ranks.token_bytes[rr])}));
  }
  Json added = Json::array();
  for (const auto& [text, id] : specials)
    added.push_back(Json{{"id", id}, {"content", text}, {"special", true}});
  Json json;
  json["added_tokens"] = added;
  json["normalizer"] = nullptr;
  json["pre_tokenizer"] =
      Json{{"type", "Sequence"},
           {"pretokenizers",
            Json::array(
                {Json{{"type", "Split"},
                      {"pattern", Json{{"Regex", regex}}},
                      {"behavior", "Isolated"},
                      {"invert", false}},
                 Json{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}};
  json["decoder"] = Json{{"type", "ByteLevel"}};
  json["model"] =
      Json{{"type", "BPE"}, {"ignore_merges", true}, {"vocab", vocab}, {"merges", merges}};
  return json;
}

TEST(HfTokenizerJson, ATokenizerJsonConvertedFromCl100kGivesTiktokensIds) {
  const std::optional<testing::fs::path> file = testing::find_rank_file("cl100k_base");
  if (!file) GTEST_SKIP() << testing::rank_file_missing_message("cl100k_base");
  auto ranks = parse_tiktoken_ranks(testing::read_file(*file), file->string());
  ASSERT_TRUE(ranks.is_ok()) << ranks.status().to_string();
  const Json json = converted_from_ranks(
      ranks.value(),
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
      find_tiktoken_encoding("cl100k_base")->special_tokens);
  auto parsed = parse_hf_tokenizer_json(json.dump(), "cl100k/tokenizer.json");
  ASSERT_TRUE(parsed.is_ok()) << parsed.status().to_string();
  const ByteLevelBpeTokenizer& hf = *parsed.value();
  const Json reference = Json::parse(
      testing::read_file(testing::fs::path(__FILE__).parent_path() / "tiktoken_reference" /
                         "expected.json"))["encodings"]["cl100k_base"];
  for (const auto& c : reference["cases"]) {
    const std::string text = c["text"];
    EXPECT_EQ(hf.encode(text, c["allow_special"]), c["ids"].get<std::vector<TokenId>>())
        << escaped(text);
  }
  const std::optional<testing::fs::path> path = testing::find_shared_file("war_and_peace.txt");
  if (!path) GTEST_SKIP() << "war_and_peace.txt not found in ../shared/data";
  const std::string text = testing::read_file(*path);
  const std::vector<TokenId> ids = hf.encode(text);
  EXPECT_EQ(testing::ids_hash(ids), reference["corpora"][1]["ids_fnv1a64"]);
  // On a failure, the first piece that differs from the rank file's tokenizer.
  auto direct = load_tiktoken_ranks(*file);
  ASSERT_TRUE(direct.is_ok());
  const std::vector<TokenId> expected = direct.value()->encode(text);
  const auto [got_at, expected_at] =
      std::mismatch(ids.begin(), ids.end(), expected.begin(), expected.end());
  if (got_at != ids.end())
    ADD_FAILURE() << "first difference at token " << (got_at - ids.begin()) << ": "
                  << escaped(
                         hf.decode(std::vector<TokenId>(got_at, std::min(got_at + 4, ids.end()))))
                  << " as " << *got_at << " (tiktoken: " << *expected_at << ")";
}

}  // namespace
}  // namespace trident::data
