#include "checkpoint/strict_json.h"

#include <set>
#include <vector>

#include "core/check.h"

namespace trident::checkpoint {

StatusOr<nlohmann::json> parse_json_strict(std::string_view text, const std::string& what) {
  using json = nlohmann::json;
  // One set of seen keys per open object; arrays never see key events.
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  auto on_event = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        open_objects.emplace_back();
        break;
      case json::parse_event_t::object_end:
        open_objects.pop_back();
        break;
      case json::parse_event_t::key: {
        const std::string& key = parsed.get_ref<const std::string&>();
        if (!open_objects.back().insert(key).second && duplicate.empty()) duplicate = key;
        break;
      }
      default:
        break;
    }
    return true;
  };
  json j;
  try {
    j = json::parse(text.begin(), text.end(), on_event);
  } catch (const json::exception& e) {
    return Status::invalid(what + " is not valid JSON: " + e.what());
  }
  if (!duplicate.empty()) {
    return Status::invalid(what + " has the key '" + duplicate + "' twice in one object");
  }
  return j;
}

std::string dump_json(const nlohmann::ordered_json& j, const std::string& what) {
  try {
    return j.dump();
  } catch (const nlohmann::json::exception& e) {
    TRI_THROW(ErrorKind::kValue, what, ": cannot be written as JSON: ", e.what());
  }
}

}  // namespace trident::checkpoint
