// A configuration made of sections, each an Options struct described by its OptionTable
// (core/options.h). Reads TOML files, applies `--section.key=value` overrides, rejects
// unknown sections and keys with a did-you-mean, prints the resolved config as TOML (with
// each key's doc as a comment) and generates help from the same tables.
//
// A ConfigTree does not own the Options structs: it binds to them, and every load or
// override writes straight into them. Bind the sections in the order they should print.
#pragma once

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
    sections_.push_back(Section{table.section(), table.doc(), &table.fields(), &options});
  }

  // Reads a TOML file: every table must be a bound section and every key one of its fields.
  [[nodiscard]] Status load_toml_file(const std::string& path);
  [[nodiscard]] Status load_toml_string(const std::string& text, const std::string& source_name);
  // Applies one "section.key=value" override (the leading "--" already stripped).
  [[nodiscard]] Status apply_override(const std::string& assignment, const std::string& where);

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
    const std::vector<OptionField>* fields;
    void* options;
  };
  const Section* find_section(const std::string& name) const;
  const OptionField* find_field(const Section& s, const std::string& key) const;
  // The section and field of "section.key", or an error naming what is unknown.
  StatusOr<std::pair<const Section*, const OptionField*>> locate(const std::string& dotted_key,
                                                                 const std::string& where) const;
  Status unknown_section(const std::string& name, const std::string& where) const;
  Status unknown_key(const Section& s, const std::string& key, const std::string& where) const;

  std::vector<Section> sections_;
};

}  // namespace trident::config
