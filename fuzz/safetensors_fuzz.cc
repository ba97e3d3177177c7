// Fuzzes the safetensors reader (checkpoint/safetensors.h): the input is a whole file. An
// accepted file's every tensor must load, whole and in parts, without reading outside the file.
#include <algorithm>

#include "checkpoint/env.h"
#include "checkpoint/safetensors.h"
#include "core/check.h"
#include "fuzz_util.h"

using namespace trident;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_scratch_file("model.safetensors", fuzz::as_text(data, size));
  auto reader = checkpoint::SafetensorsReader::open(checkpoint::default_env(), path);
  if (!reader.is_ok()) return 0;
  const checkpoint::SafetensorsReader& r = reader.value();
  for (const checkpoint::SafetensorsEntry& e : r.entries()) {
    if (r.find(e.name) != &e) fuzz::fail("find('" + e.name + "') does not give its entry");
    if (e.end > size || e.begin > e.end) fuzz::fail("accepted entry '" + e.name + "' lies outside the file");
    auto t = r.load(e.name);
    if (!e.dtype.has_value()) continue;  // NotImplemented, by contract
    if (!t.is_ok()) fuzz::fail("accepted entry '" + e.name + "' does not load: " + t.status().message());
    (void)r.load_floating(e.name);
    const int64_t n = e.numel();
    auto part = r.load_elements(e.name, n / 3, std::min<int64_t>(n - n / 3, 2));
    if (!part.is_ok()) fuzz::fail("accepted entry '" + e.name + "' does not load in part: " + part.status().message());
  }
  (void)r.load("no such tensor");
  return 0;
}
