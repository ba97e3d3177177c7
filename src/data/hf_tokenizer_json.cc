// tokenizer.json of byte-level BPE models: the supported fields are read, everything else
// refused by name (hf_tokenizer_json.h).
#include "data/hf_tokenizer_json.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "data/byte_level_vocab.h"
#include "data/read_file.h"

namespace trident::data {
namespace {

using Json = nlohmann::json;

// Reads one file's fields; every error names the file and the field ("model.type").
class Reader {
 public:
  explicit Reader(const std::string& name) : name_(name) {}

  Status fail(const std::string& field, const std::string& message) const {
    return Status::invalid(name_ + ": " + field + ": " + message);
  }
  // A field's value for messages: JSON, cut short.
  static std::string shown(const Json& v) {
    std::string s = v.dump();
    return s.size() > 80 ? s.substr(0, 77) + "..." : s;
  }
  // A string field, or the empty string if absent or null.
  StatusOr<std::string> string_or_empty(const Json& obj, const std::string& key,
                                        const std::string& field) const {
    if (!obj.contains(key) || obj[key].is_null()) return std::string();
    if (!obj[key].is_string()) return fail(field, "expected a string, found " + shown(obj[key]));
    return obj[key].get<std::string>();
  }
  // A boolean field, or `fallback` if absent or null.
  StatusOr<bool> bool_or(const Json& obj, const std::string& key, const std::string& field,
                         bool fallback) const {
    if (!obj.contains(key) || obj[key].is_null()) return fallback;
    if (!obj[key].is_boolean())
      return fail(field, "expected true or false, found " + shown(obj[key]));
    return obj[key].get<bool>();
  }

  const std::string& name() const { return name_; }

 private:
  const std::string& name_;
};

Status check_model(const Reader& r, const Json& model) {
  if (!model.is_object())
    return r.fail("model", "expected an object, found " + Reader::shown(model));
  StatusOr<std::string> type = r.string_or_empty(model, "type", "model.type");
  if (!type.is_ok()) return type.status();
  if (!type.value().empty() && type.value() != "BPE")
    return r.fail("model.type", "\"" + type.value() +
                                    "\" is not supported: trident reads tokenizer.json files of "
                                    "byte-level BPE models (\"BPE\"); for SentencePiece models "
                                    "use their tokenizer.model");
  if (model.contains("dropout") && !model["dropout"].is_null() &&
      !(model["dropout"].is_number() && model["dropout"].get<double>() == 0.0))
    return r.fail("model.dropout", Reader::shown(model["dropout"]) +
                                       " is not supported (allowed: null or 0: BPE dropout is "
                                       "for training a tokenizer, not for preparing data)");
  StatusOr<bool> byte_fallback = r.bool_or(model, "byte_fallback", "model.byte_fallback", false);
  if (!byte_fallback.is_ok()) return byte_fallback.status();
  if (byte_fallback.value())
    return r.fail("model.byte_fallback",
                  "true is not supported: a BPE with byte fallback is a SentencePiece model "
                  "(Llama 2, Mistral); give trident its tokenizer.model");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    StatusOr<std::string> v = r.string_or_empty(model, key, std::string("model.") + key);
    if (!v.is_ok()) return v.status();
    if (!v.value().empty())
      return r.fail(std::string("model.") + key, "\"" + v.value() +
                                                     "\" is not supported (allowed: null or \"\": "
                                                     "byte-level BPE marks no word boundaries)");
  }
  if (!model.contains("vocab") || !model["vocab"].is_object())
    return r.fail("model.vocab", "expected an object {token: id}");
  if (!model.contains("merges") || !model["merges"].is_array())
    return r.fail("model.merges", "expected an array of merges (\"a b\" or [\"a\", \"b\"])");
  return Status::ok();
}

// The split pattern the pre_tokenizer describes.
StatusOr<SplitPattern> read_pre_tokenizer(const Reader& r, const Json& pre) {
  const std::string field = "pre_tokenizer";
  if (!pre.is_object() || !pre.contains("type"))
    return r.fail(field,
                  "expected ByteLevel or Sequence [Split, ByteLevel], found " + Reader::shown(pre));
  // A ByteLevel step: use_regex says whether it splits by GPT-2's pattern itself.
  auto byte_level = [&](const Json& step, const std::string& at) -> StatusOr<bool> {
    StatusOr<bool> prefix = r.bool_or(step, "add_prefix_space", at + ".add_prefix_space", false);
    if (!prefix.is_ok()) return prefix.status();
    if (prefix.value())
      return r.fail(at + ".add_prefix_space",
                    "true is not supported (allowed: false): it changes the text encoded");
    return r.bool_or(step, "use_regex", at + ".use_regex", true);
  };
  const std::string type = pre["type"].is_string() ? pre["type"].get<std::string>() : "";
  if (type == "ByteLevel") {
    StatusOr<bool> regex = byte_level(pre, field);
    if (!regex.is_ok()) return regex.status();
    if (!regex.value())
      return r.fail(field + ".use_regex",
                    "false with no Split before it: the text would not be split into words");
    return SplitPattern::kGpt2;
  }
  if (type != "Sequence")
    return r.fail(field + ".type",
                  Reader::shown(pre["type"]) + " is not supported (allowed: ByteLevel, Sequence)");
  if (!pre.contains("pretokenizers") || !pre["pretokenizers"].is_array() ||
      pre["pretokenizers"].size() != 2)
    return r.fail(field + ".pretokenizers", "expected [Split, ByteLevel]");
  const Json& split = pre["pretokenizers"][0];
  const Json& bytes = pre["pretokenizers"][1];
  const std::string split_at = field + ".pretokenizers[0]", bytes_at = field + ".pretokenizers[1]";
  if (!split.is_object() || split.value("type", Json()) != "Split")
    return r.fail(split_at, "expected a Split, found " + Reader::shown(split));
  if (!bytes.is_object() || bytes.value("type", Json()) != "ByteLevel")
    return r.fail(bytes_at, "expected a ByteLevel, found " + Reader::shown(bytes));
  if (split.value("behavior", Json()) != "Isolated")
    return r.fail(split_at + ".behavior", Reader::shown(split.value("behavior", Json())) +
                                              " is not supported (allowed: \"Isolated\")");
  StatusOr<bool> invert = r.bool_or(split, "invert", split_at + ".invert", false);
  if (!invert.is_ok()) return invert.status();
  if (invert.value()) return r.fail(split_at + ".invert", "true is not supported (allowed: false)");
  const Json pattern = split.value("pattern", Json());
  if (!pattern.is_object() || !pattern.contains("Regex") || !pattern["Regex"].is_string())
    return r.fail(split_at + ".pattern",
                  "expected {\"Regex\": PATTERN}, found " + Reader::shown(pattern));
  const std::optional<SplitPattern> known =
      split_pattern_from_regex(pattern["Regex"].get<std::string>());
  if (!known)
    return r.fail(split_at + ".pattern.Regex",
                  Reader::shown(pattern["Regex"]) +
                      " is not supported (allowed: the split patterns of tiktoken's gpt2, "
                      "cl100k_base (also Llama 3's) and o200k_base, as tiktoken spells them)");
  StatusOr<bool> regex = byte_level(bytes, bytes_at);
  if (!regex.is_ok()) return regex.status();
  if (regex.value())
    return r.fail(bytes_at + ".use_regex", "true after a Split is not supported (allowed: false)");
  return *known;
}

// A special token's text from tokenizer_config.json ("eos_token": "</s>" or {"content": ...}).
std::string config_token(const Json& config, const char* key) {
  if (!config.is_object() || !config.contains(key)) return "";
  const Json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string())
    return v["content"].get<std::string>();
  return "";
}

// See Note [tokenizer.json merges as ranks]: when the merges make tokens in id order, the ids
// are tiktoken's ranks, and every multi-byte token (made by a merge or not) merges by its id.
void rank_by_id_if_converted(BpeVocab& vocab) {
  if (!std::is_sorted(vocab.merge_results.begin(), vocab.merge_results.end())) return;
  std::vector<bool> special(vocab.token_bytes.size(), false);
  for (const auto& [text, id] : vocab.special_tokens) special[id] = true;
  vocab.merge_results.clear();
  for (size_t id = 0; id < vocab.token_bytes.size(); ++id)
    if (!special[id] && vocab.token_bytes[id].size() > 1)
      vocab.merge_results.push_back(static_cast<TokenId>(id));
}

}  // namespace

StatusOr<std::unique_ptr<ByteLevelBpeTokenizer>> parse_hf_tokenizer_json(
    std::string_view json_text, const std::string& name, std::string_view config_json) {
  Json root;
  try {
    root = Json::parse(json_text);
  } catch (const Json::parse_error& e) {
    return Status::invalid(text_position(name, json_text, e.byte == 0 ? 0 : e.byte - 1) +
                           ": not valid JSON: " + e.what());
  } catch (const Json::exception& e) {  // out_of_range.406: a number past a double (1e999), found by fuzz/
    return Status::invalid(name + ": not valid JSON: " + e.what() + " (numbers must fit in a double)");
  }
  const Reader r(name);
  if (!root.is_object()) return r.fail("(top level)", "expected an object");
  if (!root.contains("model")) return r.fail("model", "missing: a tokenizer.json has a model");
  const Json& model = root["model"];
  if (Status s = check_model(r, model); !s.is_ok()) return s;
  if (root.contains("normalizer") && !root["normalizer"].is_null())
    return r.fail("normalizer", Reader::shown(root["normalizer"]) +
                                    " is not supported (allowed: null; byte-level BPE models "
                                    "encode the text as it is)");
  if (!root.contains("pre_tokenizer") || root["pre_tokenizer"].is_null())
    return r.fail("pre_tokenizer", "missing (allowed: ByteLevel or Sequence [Split, ByteLevel])");
  StatusOr<SplitPattern> pattern = read_pre_tokenizer(r, root["pre_tokenizer"]);
  if (!pattern.is_ok()) return pattern.status();
  if (root.contains("decoder") && !root["decoder"].is_null() &&
      root["decoder"].value("type", Json()) != "ByteLevel")
    return r.fail("decoder", Reader::shown(root["decoder"]) +
                                 " is not supported (allowed: null or ByteLevel)");

  // The vocabulary, then the added tokens that are not in it.
  std::vector<SymbolEntry> entries;
  std::vector<std::string> where_of;  // per entry: "model.vocab[...]" or "added_tokens[k]"
  for (const auto& [key, id] : model["vocab"].items()) {
    if (!id.is_number_unsigned() || id.get<uint64_t>() > 0x7FFFFFFF)
      return r.fail("model.vocab[" + printable_token(key) + "]",
                    "the id must be a non-negative integer below 2^31, found " + Reader::shown(id));
    entries.push_back({key, id.get<TokenId>(), entries.size()});
    where_of.push_back("model.vocab[" + printable_token(key) + "]");
  }
  std::unordered_map<std::string, TokenId> vocab_id;
  for (const SymbolEntry& e : entries) vocab_id.emplace(e.key, e.id);
  std::unordered_set<std::string> added;
  const Json added_tokens = root.value("added_tokens", Json::array());
  if (!added_tokens.is_array()) return r.fail("added_tokens", "expected an array");
  for (size_t k = 0; k < added_tokens.size(); ++k) {
    const Json& t = added_tokens[k];
    const std::string at = "added_tokens[" + std::to_string(k) + "]";
    if (!t.is_object() || !t.contains("content") || !t["content"].is_string() ||
        !t.contains("id") || !t["id"].is_number_unsigned())
      return r.fail(at, "expected {\"id\": ID, \"content\": TEXT, ...}, found " + Reader::shown(t));
    const std::string content = t["content"].get<std::string>();
    // Read whole before narrowing: 2^32 + 5 is not 5.
    if (t["id"].get<uint64_t>() > 0x7FFFFFFF)
      return r.fail(at + ".id", "the id of " + printable_token(content) +
                                    " must be a non-negative integer below 2^31, found " + Reader::shown(t["id"]));
    const TokenId id = t["id"].get<TokenId>();
    for (const char* flag : {"lstrip", "rstrip", "single_word"}) {
      StatusOr<bool> v = r.bool_or(t, flag, at + "." + flag, false);
      if (!v.is_ok()) return v.status();
      if (v.value())
        return r.fail(at + "." + flag, "true is not supported for " + printable_token(content) +
                                           " (allowed: false)");
    }
    if (content.empty()) return r.fail(at + ".content", "an added token cannot be empty");
    added.insert(content);
    if (auto it = vocab_id.find(content); it != vocab_id.end()) {
      if (it->second != id)
        return r.fail(at, printable_token(content) + " has id " + std::to_string(id) +
                              ", but model.vocab gives it " + std::to_string(it->second));
      continue;
    }
    entries.push_back({content, id, entries.size()});
    where_of.push_back(at);
    vocab_id.emplace(content, id);
  }

  std::vector<SymbolMerge> merges;
  const Json& merges_json = model["merges"];
  merges.reserve(merges_json.size());
  for (size_t k = 0; k < merges_json.size(); ++k) {
    const Json& m = merges_json[k];
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || space == 0 || space + 1 == s.size() ||
          s.find(' ', space + 1) != std::string::npos)
        return r.fail("model.merges[" + std::to_string(k) + "]",
                      "expected \"LEFT RIGHT\" (two tokens separated by one space), found " +
                          printable_token(s));
      merges.push_back({s.substr(0, space), s.substr(space + 1), k});
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      merges.push_back({m[0].get<std::string>(), m[1].get<std::string>(), k});
    } else {
      return r.fail("model.merges[" + std::to_string(k) + "]",
                    "expected \"LEFT RIGHT\" or [\"LEFT\", \"RIGHT\"], found " + Reader::shown(m));
    }
  }

  VocabRules rules;
  rules.vocab_name = name;
  rules.merges_name = name;
  rules.where_entry = [&](size_t at) { return name + ": " + where_of[at]; };
  rules.where_merge = [&](size_t k) { return name + ": model.merges[" + std::to_string(k) + "]"; };
  rules.name_merge = [](size_t k) { return "model.merges[" + std::to_string(k) + "]"; };
  rules.is_special = [&](std::string_view key) { return added.contains(std::string(key)); };
  rules.special_description = "one of its added_tokens";
  rules.allow_repeated_merges = true;
  rules.allow_special_id_gaps = true;
  StatusOr<bool> ignore_merges = r.bool_or(model, "ignore_merges", "model.ignore_merges", false);
  if (!ignore_merges.is_ok()) return ignore_merges.status();
  rules.allow_unmerged_tokens = ignore_merges.value();
  StatusOr<BpeVocab> vocab = assemble_byte_level_vocab(entries, merges, rules);
  if (!vocab.is_ok()) return vocab.status();
  if (ignore_merges.value()) rank_by_id_if_converted(vocab.value());

  ByteLevelBpeOptions options;
  options.pattern = pattern.value();
  options.kind = "tokenizer.json";
  options.label = "tokenizer.json";
  Json config;
  if (!config_json.empty()) config = Json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  auto pick = [&](const char* key, std::initializer_list<const char*> fallbacks) {
    if (std::string from_config = config_token(config, key); added.contains(from_config))
      return from_config;
    for (const char* text : fallbacks)
      if (added.contains(text)) return std::string(text);
    return std::string();
  };
  options.eot_text = pick("eos_token", {"<|endoftext|>", "<|end_of_text|>", "</s>"});
  options.bos_text = pick("bos_token", {"<|begin_of_text|>", "<s>"});
  return std::make_unique<ByteLevelBpeTokenizer>(std::move(vocab).value(), std::move(options));
}

StatusOr<std::unique_ptr<ByteLevelBpeTokenizer>> load_hf_tokenizer_json(
    const std::filesystem::path& file) {
  StatusOr<std::string> text = read_file(file);
  if (!text.is_ok()) return text.status();
  std::string config;
  const std::filesystem::path config_path = file.parent_path() / "tokenizer_config.json";
  if (std::filesystem::exists(config_path)) {
    StatusOr<std::string> c = read_file(config_path);
    if (!c.is_ok()) return c.status();
    config = std::move(c).value();
  }
  return parse_hf_tokenizer_json(text.value(), file.string(), config);
}

}  // namespace trident::data
