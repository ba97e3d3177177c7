// A configuration made of sections, each an Options struct described by its OptionTable
// (core/options.h). Reads TOML files, applies `--section.key=value` overrides, rejects
// unknown sections and keys with a did-you-mean, prints the resolved config as TOML (with
// each key's doc as a comment) and generates help from the same tables.
//
// A ConfigTree does not own the Options structs: it binds to them, and every load or
// override writes straight into them. Bind the sections in the order they should print.
//
// A section whose keys depend on one of its values (the [model] section: each model family
// has keys of its own, chosen by model.arch) gives its Options struct three more members,
// found by bind():
//   const std::vector<OptionField>& fields() const;  // the keys it has now
//   static constexpr const char* kSelectorKey;       // the key that chooses them ("arch")
//   std::string help_extra() const;                  // the keys of every choice, for help()
// A file's table and the command line's overrides set the selector before the section's
// other keys, wherever it is written, so the keys it chooses are known when they are read.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/options.h"
#include "core/status.h"

namespace trident::config {

class ConfigTree {
 public:
  template <class T>
  void bind(T& options) {
    const OptionTable<T>& table = T::table();
    Section s{table.section(), table.doc(), nullptr, &options, "", nullptr};
    if constexpr (requires { options.fields(); }) {
      s.fields = [&options]() -> const std::vector<OptionField>& { return options.fields(); };
    } else {
      s.fields = [&table]() -> const std::vector<OptionField>& { return table.fields(); };
    }
    if constexpr (requires { T::kSelectorKey; }) s.selector = T::kSelectorKey;
    if constexpr (requires { options.help_extra(); }) s.help_extra = [&options] { return options.help_extra(); };
    sections_.push_back(std::move(s));
  }

  // An array of tables ([[name]] in TOML), each element an Options struct of T's table: a
  // file's [[name]] tables replace the list's elements (`name = []` at the top empties it);
  // printed as [[name]] tables after the sections. Not settable from the command line.
  template <class T>
  void bind_list(std::vector<T>& items) {
    const OptionTable<T>& table = T::table();
    ListSection l;
    l.name = table.section();
    l.doc = table.doc();
    l.fields = &table.fields();
    l.clear = [&items] { items.clear(); };
    l.append = [&items]() -> void* { return &items.emplace_back(); };
    l.size = [&items] { return items.size(); };
    l.at = [&items](size_t i) -> const void* { return &items[i]; };
    lists_.push_back(std::move(l));
  }

  // Reads a TOML file: every table must be a bound section and every key one of its fields.
  [[nodiscard]] Status load_toml_file(const std::string& path);
  [[nodiscard]] Status load_toml_string(const std::string& text, const std::string& source_name);
  // Applies one "section.key=value" override (the leading "--" already stripped).
  [[nodiscard]] Status apply_override(const std::string& assignment, const std::string& where);
  // Applies several, the sections' selector keys first (in their order), then the rest in order.
  [[nodiscard]] Status apply_overrides(const std::vector<std::string>& assignments, const std::string& where);

  // The resolved configuration as TOML, every key present, each with its doc as a comment.
  std::string to_toml() const;
  // Help text: every section and key with type, default/current value, allowed values, doc.
  std::string help() const;
  // "section.key" for every key, in order (the frozen key set in tests/config).
  std::vector<std::string> keys() const;
  // The field and the current value of "section.key" (nullptr / an error for an unknown key).
  const OptionField* field(const std::string& dotted_key) const;
  [[nodiscard]] StatusOr<OptionValue> get(const std::string& dotted_key) const;
  // Checks `value` against the field, as a file's value is checked, and sets it.
  [[nodiscard]] Status set(const std::string& dotted_key, const OptionValue& value, const std::string& where);

 private:
  struct Section {
    std::string name, doc;
    std::function<const std::vector<OptionField>&()> fields;  // the section's keys now
    void* options;
    std::string selector;                   // the key that chooses the others ("" : none)
    std::function<std::string()> help_extra;  // more help text (nullptr: none)
  };
  // Whether "section.key=value" sets a section's selector key.
  bool is_selector(const std::string& assignment) const;
  const Section* find_section(const std::string& name) const;
  const OptionField* find_field(const Section& s, const std::string& key) const;
  // The section and field of "section.key", or an error naming what is unknown.
  StatusOr<std::pair<const Section*, const OptionField*>> locate(const std::string& dotted_key,
                                                                 const std::string& where) const;
  Status unknown_section(const std::string& name, const std::string& where) const;
  Status unknown_key(const Section& s, const std::string& key, const std::string& where) const;

  struct ListSection {
    std::string name, doc;
    const std::vector<OptionField>* fields;
    std::function<void()> clear;
    std::function<void*()> append;
    std::function<size_t()> size;
    std::function<const void*(size_t)> at;
  };
  const ListSection* find_list(const std::string& name) const;
  // Sets the fields of one [[name]] table's element from `table` (a toml::table).
  Status load_list(const ListSection& l, const void* table_node, const std::string& source_name) const;

  std::vector<Section> sections_;
  std::vector<ListSection> lists_;
};

}  // namespace trident::config
