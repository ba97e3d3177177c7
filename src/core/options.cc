#include "core/options.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace trident {

// A TOML basic string: quotes, backslashes and control characters escaped, so that every
// string value prints as TOML that reads back as the same string.
static std::string toml_quoted(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\f': out += "\\f"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04X", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string option_value_str(const OptionValue& v) {
  std::ostringstream os;
  std::visit(
      [&](const auto& x) {
        using X = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<X, bool>) {
          os << (x ? "true" : "false");
        } else if constexpr (std::is_same_v<X, std::string>) {
          os << toml_quoted(x);
        } else if constexpr (std::is_same_v<X, double>) {
          // The shortest text that reads back as the same double (6e-4, not 0.00059999...).
          char buf[32];
          const auto r = std::to_chars(buf, buf + sizeof buf, x);
          std::string text(buf, r.ptr);
          // Keep floats recognisable as floats when printed back as TOML.
          if (std::isfinite(x) && text.find_first_of(".eE") == std::string::npos) text += ".0";
          os << text;
        } else {
          os << x;
        }
      },
      v);
  return os.str();
}

const char* option_type_name(OptionType type) {
  switch (type) {
    case OptionType::kInt: return "an integer";
    case OptionType::kFloat: return "a number";
    case OptionType::kBool: return "true or false";
    case OptionType::kString: return "a string";
  }
  return "?";
}

std::string Range::str() const {
  std::ostringstream os;
  const bool lo = std::isfinite(min), hi = std::isfinite(max);
  if (lo && hi) os << "between " << min << " and " << max;
  else if (lo) os << (min_exclusive ? "> " : ">= ") << min;
  else if (hi) os << "<= " << max;
  else os << "any value";
  return os.str();
}

StatusOr<OptionValue> OptionField::check(const OptionValue& value, const std::string& where) const {
  auto bad = [&](const std::string& why) {
    return Status::invalid(where + ": " + key + " = " + option_value_str(value) + " is invalid: " + why);
  };
  switch (type) {
    case OptionType::kInt: {
      if (!std::holds_alternative<int64_t>(value)) return bad(std::string("expected ") + option_type_name(type));
      const int64_t v = std::get<int64_t>(value);
      if (!range.contains(static_cast<double>(v))) return bad("allowed: " + range.str());
      return value;
    }
    case OptionType::kFloat: {
      double v;
      if (std::holds_alternative<int64_t>(value)) v = static_cast<double>(std::get<int64_t>(value));
      else if (std::holds_alternative<double>(value)) v = std::get<double>(value);
      else return bad(std::string("expected ") + option_type_name(type));
      if (!std::isfinite(v)) return bad("must be finite");
      if (!range.contains(v)) return bad("allowed: " + range.str());
      return OptionValue(v);
    }
    case OptionType::kBool:
      if (!std::holds_alternative<bool>(value)) return bad(std::string("expected ") + option_type_name(type));
      return value;
    case OptionType::kString: {
      if (!std::holds_alternative<std::string>(value)) return bad(std::string("expected ") + option_type_name(type));
      const std::string& s = std::get<std::string>(value);
      if (!choices.empty() && std::find(choices.begin(), choices.end(), s) == choices.end()) {
        std::string allowed;
        for (const std::string& c : choices) allowed += (allowed.empty() ? "" : ", ") + c;
        std::string msg = "allowed: " + allowed;
        if (auto m = closest_match(s, choices)) msg += " (did you mean '" + *m + "'?)";
        return bad(msg);
      }
      if (string_check.accepts && !string_check.accepts(s)) return bad("allowed: " + string_check.allowed);
      return value;
    }
  }
  return bad("unknown type");
}

StatusOr<OptionValue> OptionField::parse(const std::string& text, const std::string& where) const {
  auto bad = [&](const std::string& why) {
    return Status::invalid(where + ": " + key + " = '" + text + "' is invalid: " + why);
  };
  switch (type) {
    case OptionType::kInt: {
      errno = 0;
      char* end = nullptr;
      const long long v = std::strtoll(text.c_str(), &end, 10);
      if (text.empty() || *end != '\0' || errno == ERANGE) return bad(std::string("expected ") + option_type_name(type));
      return check(OptionValue(static_cast<int64_t>(v)), where);
    }
    case OptionType::kFloat: {
      errno = 0;
      char* end = nullptr;
      const double v = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0' || errno == ERANGE) return bad(std::string("expected ") + option_type_name(type));
      return check(OptionValue(v), where);
    }
    case OptionType::kBool:
      if (text == "true" || text == "1") return OptionValue(true);
      if (text == "false" || text == "0") return OptionValue(false);
      return bad(std::string("expected ") + option_type_name(type));
    case OptionType::kString: return check(OptionValue(text), where);
  }
  return bad("unknown type");
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::vector<std::string> list_items(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream list(text);
  for (std::string item; std::getline(list, item, ',');) {
    const size_t b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    if (b != std::string::npos) items.push_back(item.substr(b, e - b + 1));
  }
  return items;
}

std::optional<std::string> closest_match(std::string_view word, const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  size_t best_d = std::max<size_t>(2, word.size() / 3) + 1;  // plausible typos only
  for (const std::string& c : candidates) {
    size_t d = edit_distance(word, c);
    // "optimizer" for "optim", "lr_warm" for "lr_warmup_steps": a shared prefix is a typo too.
    const std::string_view shorter = word.size() < c.size() ? word : std::string_view(c);
    const std::string_view longer = word.size() < c.size() ? std::string_view(c) : word;
    if (shorter.size() >= 3 && longer.starts_with(shorter)) d = std::min<size_t>(d, 1);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

}  // namespace trident
