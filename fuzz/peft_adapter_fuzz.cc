// Fuzzes PEFT adapter directories (adapters/peft_files.h): the input is adapter_config.json and,
// after its first NUL, adapter_model.safetensors. An accepted directory promises a rank in
// [1, 65536], a positive alpha, a dropout in [0, 1), targets (names or one pattern), and floating
// tensors; lora_options_for then agrees with it or names the difference.
#include "adapters/peft_files.h"
#include "fuzz_util.h"

using namespace trident;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto [config, weights] = fuzz::split_at_nul(data, size);
  fuzz::write_scratch_file("adapter_config.json", config);
  fuzz::write_scratch_file("adapter_model.safetensors", weights);
  auto a = adapters::read_peft_adapter(fuzz::scratch_dir());
  if (!a.is_ok()) return 0;
  const adapters::LoraOptions& o = a.value().options;
  if (o.r < 1 || o.r > 65536 || !(o.alpha > 0) || !(o.dropout >= 0 && o.dropout < 1))
    fuzz::fail("accepted options out of range");
  if (a.value().targets.items.empty() && !a.value().targets.regex) fuzz::fail("accepted without targets");
  for (const checkpoint::NamedTensor& t : a.value().tensors)
    if (!is_floating(t.tensor.dtype())) fuzz::fail("accepted a tensor that is not floating point");
  auto resolved = adapters::lora_options_for(a.value(), adapters::LoraOptions{});
  if (!resolved.is_ok()) fuzz::fail("lora_options_for refused an adapter with [lora] unset: " + resolved.status().message());
  if (resolved.value().r != o.r) fuzz::fail("lora_options_for changed the rank");
  return 0;
}
