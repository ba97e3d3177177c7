// Parsing JSON read from files (safetensors headers, manifests, DONE markers): the checks
// nlohmann::json does not make by default.
//   - A key repeated in one object is an error (nlohmann keeps the last one silently), so a
//     header cannot describe a tensor twice with the second description hiding the first.
//   - Errors are Status values, not exceptions, prefixed with what was being parsed.
// Not here: schema checks; each format validates its own fields.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace trident::checkpoint {

// Parses `text`. `what` names the source in messages ("safetensors file 'x': header").
StatusOr<nlohmann::json> parse_json_strict(std::string_view text, const std::string& what);

// Serializes compactly; invalid UTF-8 in a string becomes a ValueError naming `what`.
std::string dump_json(const nlohmann::ordered_json& j, const std::string& what);

}  // namespace trident::checkpoint
