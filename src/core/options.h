// Typed option tables: the single definition of every configuration key.
//
// Each component owns a plain `struct Options` with defaults, and describes its fields once
// in a table (key, member, one-line doc, allowed range or choices). Everything else is
// generated from that table: parsing from a config file, `--section.key=value` overrides,
// validation with messages that name the key, the value and what is allowed (with a
// did-you-mean for unknown keys), printing the resolved config, and help text. So a key can
// never be parsed under one name and documented under another, and an unknown key is an
// error, not silently ignored.
//
//   struct OptimOptions {
//     double lr = 6e-4;
//     static const OptionTable<OptimOptions>& table() {
//       static const auto t = OptionTable<OptimOptions>("optim", "AdamW optimizer")
//           .add("lr", &OptimOptions::lr, "peak learning rate", Range::positive());
//       return t;
//     }
//   };
//
// This file knows no file format: config/ reads TOML into OptionValues.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/status.h"

namespace trident {

// A value as read from a file or the command line, before it is checked against a field.
using OptionValue = std::variant<int64_t, double, bool, std::string>;
std::string option_value_str(const OptionValue& v);

enum class OptionType { kInt, kFloat, kBool, kString };
const char* option_type_name(OptionType type);

// Allowed numeric range (inclusive bounds unless marked exclusive).
struct Range {
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool min_exclusive = false;
  static Range any() { return {}; }
  static Range positive() { return {0.0, std::numeric_limits<double>::infinity(), true}; }
  static Range non_negative() { return {0.0}; }
  static Range at_least(double v) { return {v}; }
  static Range between(double lo, double hi) { return {lo, hi}; }
  bool contains(double v) const { return (min_exclusive ? v > min : v >= min) && v <= max; }
  std::string str() const;
};

// A string field checked by a function instead of a list of choices (e.g. a duration).
struct StringCheck {
  std::string allowed;                               // what is allowed, for the error message
  std::function<bool(const std::string&)> accepts;
};

// One field, type-erased: what every generic tool (parser, printer, help) works with.
struct OptionField {
  std::string key;
  std::string doc;
  OptionType type;
  Range range;                       // numeric fields
  std::vector<std::string> choices;  // string fields restricted to a set (empty: any string)
  StringCheck string_check;          // string fields checked by a function (unset: any string)
  std::function<OptionValue(const void* options)> get;
  std::function<void(void* options, const OptionValue& value)> set;

  // Converts and checks a value for this field: ints widen to floats, strings are parsed
  // when they come from the command line. The error names `where`, the key, the value and
  // what is allowed.
  StatusOr<OptionValue> check(const OptionValue& value, const std::string& where) const;
  // Parses a command-line string ("3", "1e-4", "true", "cosine") for this field.
  StatusOr<OptionValue> parse(const std::string& text, const std::string& where) const;
};

template <class T>
class OptionTable {
 public:
  OptionTable(std::string section, std::string doc) : section_(std::move(section)), doc_(std::move(doc)) {}

  OptionTable&& add(std::string key, int64_t T::*member, std::string doc, Range range = {}) && {
    return push(std::move(key), member, std::move(doc), OptionType::kInt, range, {});
  }
  OptionTable&& add(std::string key, double T::*member, std::string doc, Range range = {}) && {
    return push(std::move(key), member, std::move(doc), OptionType::kFloat, range, {});
  }
  OptionTable&& add(std::string key, bool T::*member, std::string doc) && {
    return push(std::move(key), member, std::move(doc), OptionType::kBool, {}, {});
  }
  OptionTable&& add(std::string key, std::string T::*member, std::string doc,
                    std::vector<std::string> choices = {}) && {
    return push(std::move(key), member, std::move(doc), OptionType::kString, {}, std::move(choices));
  }
  OptionTable&& add(std::string key, std::string T::*member, std::string doc, StringCheck check) && {
    push(std::move(key), member, std::move(doc), OptionType::kString, {}, {});
    fields_.back().string_check = std::move(check);
    return std::move(*this);
  }

  const std::string& section() const { return section_; }
  const std::string& doc() const { return doc_; }
  const std::vector<OptionField>& fields() const { return fields_; }

 private:
  template <class M>
  OptionTable&& push(std::string key, M T::*member, std::string doc, OptionType type, Range range,
                     std::vector<std::string> choices) {
    OptionField f{std::move(key), std::move(doc), type, range, std::move(choices), {}, nullptr, nullptr};
    f.get = [member](const void* o) { return OptionValue(static_cast<const T*>(o)->*member); };
    f.set = [member](void* o, const OptionValue& v) { static_cast<T*>(o)->*member = std::get<M>(v); };
    fields_.push_back(std::move(f));
    return std::move(*this);
  }

  std::string section_, doc_;
  std::vector<OptionField> fields_;
};

// Edit distance, for did-you-mean suggestions.
size_t edit_distance(std::string_view a, std::string_view b);
// The closest candidate to `word` if it is close enough to be a plausible typo.
std::optional<std::string> closest_match(std::string_view word, const std::vector<std::string>& candidates);

// The items of a comma-separated list value ("a, b,c" -> a, b, c): blanks around items
// trimmed, empty items dropped ("" -> none). train.freeze and lora.target_modules are such lists.
std::vector<std::string> list_items(const std::string& text);

}  // namespace trident
