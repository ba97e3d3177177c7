// The meaning checks of a byte-level BPE vocabulary, shared by its file formats
// (byte_level_vocab.h).
#include "data/byte_level_vocab.h"

#include <algorithm>
#include <cstdio>
#include <unordered_map>

#include "data/byte_unicode.h"
#include "data/utf8.h"

namespace trident::data {

std::string text_position(const std::string& name, std::string_view text, size_t offset) {
  size_t line = 1, line_start = 0;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return name + ":" + std::to_string(line) + ":" + std::to_string(offset - line_start + 1);
}

std::string printable_token(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < 80; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02X", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > 80) out += "...";
  return out + "\"";
}

StatusOr<BpeVocab> assemble_byte_level_vocab(const std::vector<SymbolEntry>& entries,
                                             const std::vector<SymbolMerge>& merges,
                                             const VocabRules& rules) {
  const std::string& vocab_name = rules.vocab_name;
  const std::string& merges_name = rules.merges_name;
  // Keys and ids must both be unique, and the ids must be exactly 0..N-1 (or, with
  // special_id_gaps, at most the largest id).
  const size_t n = entries.size();
  size_t n_ids = n;
  if (rules.allow_special_id_gaps)
    for (const SymbolEntry& e : entries) {
      if (e.id >= n + kMaxSpecialIdGaps)
        return Status::invalid(rules.where_entry(e.at) + ": the id " + std::to_string(e.id) + " of " +
                               printable_token(e.key) + " is out of range: a vocabulary of " + std::to_string(n) +
                               " tokens must use ids below " + std::to_string(n + kMaxSpecialIdGaps) +
                               " (0.." + std::to_string(n - 1) + ", special tokens leaving at most " +
                               std::to_string(kMaxSpecialIdGaps) + " unused)");
      n_ids = std::max<size_t>(n_ids, size_t{e.id} + 1);
    }
  std::unordered_map<std::string_view, size_t> entry_of_key;
  std::vector<int64_t> entry_of_id(n_ids, -1);
  entry_of_key.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const SymbolEntry& e = entries[i];
    auto [it, inserted] = entry_of_key.emplace(e.key, i);
    if (!inserted)
      return Status::invalid(rules.where_entry(e.at) + ": the token " + printable_token(e.key) +
                             " appears twice (first at " +
                             rules.where_entry(entries[it->second].at) + ")");
    if (e.id >= n_ids)
      return Status::invalid(rules.where_entry(e.at) + ": the id " + std::to_string(e.id) + " of " +
                             printable_token(e.key) + " is out of range: a vocabulary of " +
                             std::to_string(n) + " tokens must use the ids 0.." +
                             std::to_string(n - 1));
    if (entry_of_id[e.id] >= 0)
      return Status::invalid(rules.where_entry(e.at) + ": the id " + std::to_string(e.id) + " of " +
                             printable_token(e.key) + " is already the id of " +
                             printable_token(entries[entry_of_id[e.id]].key));
    entry_of_id[e.id] = static_cast<int64_t>(i);
  }

  // Every byte needs its own token.
  enum class Kind : uint8_t { kUnknown, kByte, kMerge };
  std::vector<Kind> kind(n, Kind::kUnknown);
  for (int b = 0; b < 256; ++b) {
    std::string symbol;
    append_utf8(symbol, byte_to_symbol(static_cast<uint8_t>(b)));
    auto it = entry_of_key.find(symbol);
    if (it == entry_of_key.end()) {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "byte 0x%02X (written %s, %s)", b, symbol.c_str(),
                    format_code_point(byte_to_symbol(static_cast<uint8_t>(b))).c_str());
      return Status::invalid(vocab_name + ": there is no token for " + buf +
                             ": a byte-level BPE vocabulary has a token for each of the 256 "
                             "bytes");
    }
    kind[it->second] = Kind::kByte;
  }

  // Each merge joins two tokens of the vocabulary into a third one.
  BpeVocab vocab;
  vocab.merge_results.reserve(merges.size());
  std::vector<size_t> merge_of_entry(n, 0);
  for (size_t k = 0; k < merges.size(); ++k) {
    const SymbolMerge& m = merges[k];
    const std::string at = rules.where_merge(m.at) + ": ";
    for (const std::string* part : {&m.left, &m.right})
      if (!entry_of_key.contains(*part))
        return Status::invalid(at + "the merge " + printable_token(m.left) + " + " +
                               printable_token(m.right) + " names " + printable_token(*part) +
                               ", which is not in " + vocab_name);
    const std::string joined = m.left + m.right;
    auto it = entry_of_key.find(joined);
    if (it == entry_of_key.end())
      return Status::invalid(at + "the merge " + printable_token(m.left) + " + " +
                             printable_token(m.right) + " makes " + printable_token(joined) +
                             ", which is not in " + vocab_name);
    // (joined has two or more symbols, so it is never a single byte's token.)
    const size_t e = it->second;
    if (kind[e] == Kind::kMerge) {
      if (rules.allow_repeated_merges) continue;
      return Status::invalid(at + "the merge " + printable_token(m.left) + " + " +
                             printable_token(m.right) + " makes " + printable_token(joined) +
                             ", which " + rules.name_merge(merges[merge_of_entry[e]].at) +
                             " already makes");
    }
    kind[e] = Kind::kMerge;
    merge_of_entry[e] = k;
    vocab.merge_results.push_back(entries[e].id);
  }

  // What is left must be a special token; everything else is spelled in byte symbols.
  vocab.token_bytes.resize(n_ids);  // ids no entry has stay empty: they stand for nothing
  for (size_t i = 0; i < n; ++i) {
    const SymbolEntry& e = entries[i];
    if (kind[i] == Kind::kUnknown && !(rules.allow_unmerged_tokens && !rules.is_special(e.key))) {
      if (!rules.is_special(e.key))
        return Status::invalid(
            rules.where_entry(e.at) + ": the token " + printable_token(e.key) + " (id " +
            std::to_string(e.id) + ") is neither a byte, the result of a merge in " + merges_name +
            ", nor " + rules.special_description + ": this is not a byte-level BPE vocabulary");
      vocab.token_bytes[e.id] = e.key;
      vocab.special_tokens.emplace_back(e.key, e.id);
      continue;
    }
    std::optional<std::string> bytes = symbols_to_bytes(e.key);
    if (!bytes)
      return Status::invalid(rules.where_entry(e.at) + ": the token " + printable_token(e.key) +
                             " contains " + format_code_point(*first_non_symbol(e.key)) +
                             ", which is not one of the 256 byte symbols of GPT-2's byte-level "
                             "BPE: this is not a byte-level BPE vocabulary");
    vocab.token_bytes[e.id] = std::move(*bytes);
  }
  // Only special tokens may leave gaps: the ids below the last ordinary token are all taken.
  size_t ordinary_ids = 0;  // 1 + the largest id of a token that is not special
  for (size_t i = 0; i < n; ++i)
    if (kind[i] != Kind::kUnknown || !rules.is_special(entries[i].key))
      ordinary_ids = std::max<size_t>(ordinary_ids, size_t{entries[i].id} + 1);
  for (size_t id = 0; id < ordinary_ids; ++id)
    if (vocab.token_bytes[id].empty())
      return Status::invalid(vocab_name + ": no token has the id " + std::to_string(id) +
                             ": ids must be 0..N-1, save for special tokens' ids after them");
  std::sort(vocab.special_tokens.begin(), vocab.special_tokens.end(),
            [](const auto& a, const auto& b) { return a.second < b.second; });
  vocab.source = vocab_name == merges_name ? vocab_name : vocab_name + " + " + merges_name;
  return vocab;
}

}  // namespace trident::data
