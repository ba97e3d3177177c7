// Fuzzes Hugging Face config.json (train/hf_model_dir.h, models' from_hf readers): the input is
// a model directory's config.json. An accepted architecture may be refused by validate() only
// with a trident::Error.
#include "core/check.h"
#include "fuzz_util.h"
#include "train/hf_model_dir.h"

using namespace trident;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::write_scratch_file("config.json", fuzz::as_text(data, size));
  auto cfg = train::hf_model_config(fuzz::scratch_dir(), models::ModelConfig{});
  if (!cfg.is_ok()) return 0;
  try {
    cfg.value().validate();
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kInternal) fuzz::fail(std::string("validate(): internal error: ") + e.what());
  }
  return 0;
}
