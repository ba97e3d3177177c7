#include "config/config_tree.h"

#include <fstream>
#include <sstream>

#include <toml++/toml.h>

namespace trident::config {
namespace {

// Checks a TOML value against field `f` and sets it in `options`; `at` says where it was read.
Status set_from_toml(const OptionField& f, const toml::node& value_node, void* options, const std::string& at) {
  OptionValue v;
  if (auto i = value_node.value_exact<int64_t>()) v = *i;
  else if (auto d = value_node.value_exact<double>()) v = *d;
  else if (auto b = value_node.value_exact<bool>()) v = *b;
  else if (auto str = value_node.value_exact<std::string>()) v = *str;
  else return Status::invalid(at + ": " + f.key + " has an unsupported TOML type (expected " + option_type_name(f.type) + ")");
  StatusOr<OptionValue> checked = f.check(v, at);
  if (!checked.is_ok()) return checked.status();
  f.set(options, checked.value());
  return Status::ok();
}

}  // namespace

const ConfigTree::Section* ConfigTree::find_section(const std::string& name) const {
  for (const Section& s : sections_)
    if (s.name == name) return &s;
  return nullptr;
}

const OptionField* ConfigTree::find_field(const Section& s, const std::string& key) const {
  for (const OptionField& f : s.fields())
    if (f.key == key) return &f;
  return nullptr;
}

Status ConfigTree::unknown_section(const std::string& name, const std::string& where) const {
  std::vector<std::string> names;
  std::string all;
  for (const Section& s : sections_) {
    names.push_back(s.name);
    all += (all.empty() ? "" : ", ") + s.name;
  }
  std::string msg = where + ": unknown section [" + name + "]";
  if (auto m = closest_match(name, names)) msg += " (did you mean [" + *m + "]?)";
  return Status::invalid(msg + "; sections are: " + all);
}

Status ConfigTree::unknown_key(const Section& s, const std::string& key, const std::string& where) const {
  std::vector<std::string> keys;
  for (const OptionField& f : s.fields()) keys.push_back(f.key);
  std::string msg = where + ": unknown key '" + key + "' in section [" + s.name + "]";
  if (auto m = closest_match(key, keys)) msg += " (did you mean '" + *m + "'?)";
  std::string all;
  for (const std::string& k : keys) all += (all.empty() ? "" : ", ") + k;
  return Status::invalid(msg + "; keys are: " + all);
}

const ConfigTree::ListSection* ConfigTree::find_list(const std::string& name) const {
  for (const ListSection& l : lists_)
    if (l.name == name) return &l;
  return nullptr;
}

Status ConfigTree::load_list(const ListSection& l, const void* table_node, const std::string& source_name) const {
  const auto& tbl = *static_cast<const toml::table*>(table_node);
  void* options = l.append();
  for (auto&& [key_node, value_node] : tbl) {
    const std::string key(key_node.str());
    const std::string at = source_name + ":" + std::to_string(key_node.source().begin.line) + " [[" + l.name + "]]";
    const OptionField* f = nullptr;
    std::vector<std::string> keys;
    for (const OptionField& candidate : *l.fields) {
      keys.push_back(candidate.key);
      if (candidate.key == key) f = &candidate;
    }
    if (f == nullptr) {
      std::string msg = at + ": unknown key '" + key + "'";
      if (auto m = closest_match(key, keys)) msg += " (did you mean '" + *m + "'?)";
      std::string all;
      for (const std::string& k : keys) all += (all.empty() ? "" : ", ") + k;
      return Status::invalid(msg + "; keys are: " + all);
    }
    if (Status st = set_from_toml(*f, value_node, options, at); !st.is_ok()) return st;
  }
  return Status::ok();
}

Status ConfigTree::load_toml_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::io_error("cannot open config file '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return load_toml_string(text.str(), path);
}

Status ConfigTree::load_toml_string(const std::string& text, const std::string& source_name) {
  toml::table root;
  try {
    root = toml::parse(text, source_name);
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << source_name << ":" << e.source().begin.line << ":" << e.source().begin.column << ": " << e.description();
    return Status::invalid(os.str());
  }
  for (auto&& [section_key, node] : root) {
    const std::string name(section_key.str());
    const std::string where = source_name + ":" + std::to_string(section_key.source().begin.line);
    if (const ListSection* l = find_list(name)) {
      const toml::array* arr = node.as_array();
      if (arr == nullptr)
        return Status::invalid(where + ": '" + name + "' must be an array of tables ([[" + name + "]], or " + name +
                               " = [] for none)");
      l->clear();
      for (const toml::node& item : *arr) {
        if (!item.is_table()) return Status::invalid(where + ": each element of '" + name + "' must be a table ([[" + name + "]])");
        if (Status s = load_list(*l, &item, source_name); !s.is_ok()) return s;
      }
      continue;
    }
    const Section* s = find_section(name);
    if (s == nullptr && !node.is_table()) {  // `n_layer = 4` above every header: a key, not a section
      std::string owners;
      for (const Section& c : sections_)
        if (find_field(c, name) != nullptr) owners += (owners.empty() ? "[" : " or [") + c.name + "]";
      if (!owners.empty())
        return Status::invalid(where + ": '" + name + "' is outside any section: put it under " + owners +
                               " (keys go under a section header)");
    }
    if (s == nullptr) return unknown_section(name, where);
    const toml::table* tbl = node.as_table();
    if (tbl == nullptr) return Status::invalid(where + ": '" + name + "' must be a table ([" + name + "])");
    // The selector first (ConfigTree's header): the keys it chooses are read after it.
    std::vector<std::pair<const toml::key*, const toml::node*>> entries;
    for (auto&& [key_node, value_node] : *tbl) {
      if (!s->selector.empty() && key_node.str() == s->selector) entries.insert(entries.begin(), {&key_node, &value_node});
      else entries.emplace_back(&key_node, &value_node);
    }
    for (const auto& [key_ptr, value_ptr] : entries) {
      const toml::key& key_node = *key_ptr;
      const toml::node& value_node = *value_ptr;
      const std::string key(key_node.str());
      const std::string at = source_name + ":" + std::to_string(key_node.source().begin.line) + " [" + name + "]";
      const OptionField* f = find_field(*s, key);
      if (f == nullptr) return unknown_key(*s, key, at);
      if (Status st = set_from_toml(*f, value_node, s->options, at); !st.is_ok()) return st;
    }
  }
  return Status::ok();
}

Status ConfigTree::apply_override(const std::string& assignment, const std::string& where) {
  const size_t eq = assignment.find('=');
  const size_t dot = assignment.find('.');
  if (eq == std::string::npos || dot == std::string::npos || dot > eq)
    return Status::invalid(where + ": override '" + assignment + "' must look like section.key=value");
  const std::string name = assignment.substr(0, dot);
  const std::string key = assignment.substr(dot + 1, eq - dot - 1);
  const std::string text = assignment.substr(eq + 1);
  const Section* s = find_section(name);
  if (s == nullptr) return unknown_section(name, where);
  const OptionField* f = find_field(*s, key);
  if (f == nullptr) return unknown_key(*s, key, where);
  StatusOr<OptionValue> v = f->parse(text, where + " --" + name);
  if (!v.is_ok()) return v.status();
  f->set(s->options, v.value());
  return Status::ok();
}

bool ConfigTree::is_selector(const std::string& assignment) const {
  const size_t eq = assignment.find('='), dot = assignment.find('.');
  if (eq == std::string::npos || dot == std::string::npos || dot > eq) return false;
  const Section* s = find_section(assignment.substr(0, dot));
  return s != nullptr && !s->selector.empty() && assignment.substr(dot + 1, eq - dot - 1) == s->selector;
}

Status ConfigTree::apply_overrides(const std::vector<std::string>& assignments, const std::string& where) {
  for (const bool selectors : {true, false})
    for (const std::string& a : assignments) {
      if (is_selector(a) != selectors) continue;
      Status s = apply_override(a, where);
      if (!s.is_ok()) return s;
    }
  return Status::ok();
}

std::string ConfigTree::to_toml() const {
  std::ostringstream os;
  // An empty list is a top-level key, which TOML wants before the first table.
  for (const ListSection& l : lists_)
    if (l.size() == 0) os << "# " << l.doc << "\n" << l.name << " = []\n\n";
  for (const Section& s : sections_) {
    os << "# " << s.doc << "\n[" << s.name << "]\n";
    for (const OptionField& f : s.fields())
      os << f.key << " = " << option_value_str(f.get(s.options)) << "  # " << f.doc << "\n";
    os << "\n";
  }
  for (const ListSection& l : lists_) {
    for (size_t i = 0; i < l.size(); ++i) {
      os << "# " << l.doc << "\n[[" << l.name << "]]\n";
      for (const OptionField& f : *l.fields)
        os << f.key << " = " << option_value_str(f.get(l.at(i))) << "  # " << f.doc << "\n";
      os << "\n";
    }
  }
  return os.str();
}

std::string ConfigTree::help() const {
  std::ostringstream os;
  for (const Section& s : sections_) {
    os << "[" << s.name << "]  " << s.doc << "\n";
    for (const OptionField& f : s.fields()) {
      os << "  --" << s.name << "." << f.key << "=" << option_value_str(f.get(s.options)) << "\n      " << f.doc;
      if (!f.choices.empty()) {
        os << " (one of:";
        for (const std::string& c : f.choices) os << " " << c;
        os << ")";
      } else if (f.type == OptionType::kInt || f.type == OptionType::kFloat) {
        if (f.range.str() != "any value") os << " (" << f.range.str() << ")";
      }
      os << "\n";
    }
    if (s.help_extra) os << s.help_extra();
  }
  for (const ListSection& l : lists_) {
    os << "[[" << l.name << "]]  " << l.doc << " (config file only; each table has these keys; now " << l.size()
       << ")\n";
    for (const OptionField& f : *l.fields) {
      os << "  " << f.key << "\n      " << f.doc;
      if (!f.choices.empty()) {
        os << " (one of:";
        for (const std::string& c : f.choices) os << " " << c;
        os << ")";
      }
      os << "\n";
    }
  }
  return os.str();
}

std::vector<std::string> ConfigTree::keys() const {
  std::vector<std::string> out;
  for (const Section& s : sections_)
    for (const OptionField& f : s.fields()) out.push_back(s.name + "." + f.key);
  return out;
}

StatusOr<std::pair<const ConfigTree::Section*, const OptionField*>> ConfigTree::locate(const std::string& dotted_key,
                                                                                     const std::string& where) const {
  const size_t dot = dotted_key.find('.');
  if (dot == std::string::npos) return Status::invalid(where + ": '" + dotted_key + "' must look like section.key");
  const std::string name = dotted_key.substr(0, dot), key = dotted_key.substr(dot + 1);
  const Section* s = find_section(name);
  if (s == nullptr) return unknown_section(name, where);
  const OptionField* f = find_field(*s, key);
  if (f == nullptr) return unknown_key(*s, key, where);
  return std::make_pair(s, f);
}

const OptionField* ConfigTree::field(const std::string& dotted_key) const {
  auto at = locate(dotted_key, "");
  return at.is_ok() ? at.value().second : nullptr;
}

StatusOr<OptionValue> ConfigTree::get(const std::string& dotted_key) const {
  auto at = locate(dotted_key, "get");
  if (!at.is_ok()) return at.status();
  return at.value().second->get(at.value().first->options);
}

Status ConfigTree::set(const std::string& dotted_key, const OptionValue& value, const std::string& where) {
  auto at = locate(dotted_key, where);
  if (!at.is_ok()) return at.status();
  const auto [s, f] = at.value();
  StatusOr<OptionValue> checked = f->check(value, where + " [" + s->name + "]");
  if (!checked.is_ok()) return checked.status();
  f->set(s->options, checked.value());
  return Status::ok();
}

}  // namespace trident::config
