// Fuzzes checkpoint manifests (checkpoint/manifest.h) and the strict JSON parser under them
// (checkpoint/strict_json.h): the input is a manifest.json. An accepted manifest must survive
// writing and reading back unchanged.
#include "checkpoint/manifest.h"
#include "checkpoint/strict_json.h"
#include "fuzz_util.h"

using namespace trident;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = fuzz::as_text(data, size);
  auto json = checkpoint::parse_json_strict(text, "fuzz input");
  if (json.is_ok()) (void)checkpoint::dump_json(nlohmann::ordered_json(json.value()), "fuzz input");
  auto manifest = checkpoint::parse_manifest(text, "fuzz manifest.json");
  if (!manifest.is_ok()) return 0;
  const std::string again = checkpoint::manifest_to_json(manifest.value());
  auto reread = checkpoint::parse_manifest(again, "fuzz manifest.json, written back");
  if (!reread.is_ok()) fuzz::fail("an accepted manifest, written back, is refused: " + reread.status().message());
  if (checkpoint::manifest_to_json(reread.value()) != again) fuzz::fail("manifest changes on a round trip");
  return 0;
}
