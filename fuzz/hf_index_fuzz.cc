// Fuzzes Hugging Face weight indexes (model.safetensors.index.json, train/hf_model_dir.h
// hf_weight_files): the input is the index, in a directory that also holds two shard files.
// Accepted shard paths must be files of the directory.
#include <filesystem>

#include "fuzz_util.h"
#include "train/hf_model_dir.h"

using namespace trident;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool shards = [] {
    fuzz::write_scratch_file("model-00001-of-00002.safetensors", "");
    fuzz::write_scratch_file("model-00002-of-00002.safetensors", "");
    return true;
  }();
  (void)shards;
  fuzz::write_scratch_file("model.safetensors.index.json", fuzz::as_text(data, size));
  auto files = train::hf_weight_files(fuzz::scratch_dir());
  if (!files.is_ok()) return 0;
  for (const std::string& f : files.value()) {
    const std::filesystem::path p(f);
    if (p.parent_path() != std::filesystem::path(fuzz::scratch_dir()) || !std::filesystem::is_regular_file(p))
      fuzz::fail("accepted index names '" + f + "', not a file of the directory");
  }
  return 0;
}
