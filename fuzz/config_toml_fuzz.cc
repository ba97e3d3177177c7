// Fuzzes the training config (config/config_tree.h over train/train_config.h): the input is a
// TOML file, and each of its lines is also tried as a `--section.key=value` override. An accepted
// config, printed and read back, must give the same config; validate() may refuse it only with
// a trident::Error.
#include <string>
#include <vector>

#include "config/config_tree.h"
#include "core/check.h"
#include "fuzz_util.h"
#include "train/train_config.h"

using namespace trident;

namespace {

void validate(const train::TrainConfig& cfg) {
  try {
    cfg.validate();
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kInternal) fuzz::fail(std::string("validate(): internal error: ") + e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(fuzz::as_text(data, size));
  train::TrainConfig cfg;
  config::ConfigTree tree;
  cfg.bind(tree);
  if (tree.load_toml_string(text, "fuzz.toml").is_ok()) {
    validate(cfg);
    const std::string printed = tree.to_toml();
    train::TrainConfig again;
    config::ConfigTree again_tree;
    again.bind(again_tree);
    Status s = again_tree.load_toml_string(printed, "fuzz.toml, printed");
    if (!s.is_ok()) fuzz::fail("an accepted config, printed, is refused: " + s.message() + "\n" + printed);
    if (again_tree.to_toml() != printed) fuzz::fail("config changes when printed and read back:\n" + printed);
  }
  // The same bytes as command-line overrides, one per line.
  std::vector<std::string> overrides;
  size_t start = 0;
  while (start <= text.size() && overrides.size() < 64) {
    const size_t end = std::min(text.find('\n', start), text.size());
    overrides.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  train::TrainConfig over;
  config::ConfigTree over_tree;
  over.bind(over_tree);
  if (over_tree.apply_overrides(overrides, "fuzz command line").is_ok()) validate(over);
  return 0;
}
