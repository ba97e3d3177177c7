// `trident export` of a quantized directory (`trident quantize --scheme int8|int4`): as GGUF, its
// Q8_0 and Q4_0 blocks copied (export/gguf_quantized_dir.h). Other formats take the checkpoint
// the directory came from.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "export_summary.h"
#include "export/gguf_quantized_dir.h"
#include "loading/model_source.h"
#include "loading/quantized_dir.h"

namespace trident::cli {

Status run_export_quantized(const ExportArgs& a) {
  const std::string format = !a.format.empty() ? a.format : a.out.ends_with(".gguf") ? "gguf" : "";
  if (format != "gguf")
    return Status::invalid("export: " + a.checkpoint + " is a quantized directory, which is exported as GGUF only "
                           "(--format gguf or an --out ending in .gguf); for other formats export the checkpoint it "
                           "came from");
  if (a.merge_lora) return Status::invalid("export --merge-lora: " + a.checkpoint + " is a quantized directory, not a LoRA run's checkpoint");
  if (const auto out = resolved_path(a.out), in = resolved_path(a.checkpoint); is_within(out, in))
    return Status::invalid("export: --out '" + a.out + "' is inside the quantized directory it reads, '" + a.checkpoint +
                           "'; choose an --out outside it");
  auto rest = exporting::parse_gguf_weights(a.type, "export: --type");
  if (!rest.is_ok()) return rest.status();
  auto src = loading::resolve_model_source(a.checkpoint);
  if (!src.is_ok()) return src.status();
  auto tokenizer = loading::load_tokenizer(src.value(), a.tokenizer, a.vocab_dir);
  if (!tokenizer.is_ok()) return tokenizer.status();
  if (Status made = create_parent_dirs(a.out); !made.is_ok()) return made;
  auto written = exporting::write_gguf_from_quantized_dir(a.checkpoint, a.out, rest.value(), *tokenizer.value());
  if (!written.is_ok()) return written.status();
  nlohmann::ordered_json out = {{"quantized_dir", a.checkpoint}, {"out", a.out}, {"format", "gguf"},
                                {"type", "copied blocks; the rest " + std::string(exporting::gguf_weights_name(rest.value()))}};
  out.update(gguf_summary(written.value(), *tokenizer.value()));
  std::printf("%s\n", out.dump().c_str());
  return Status::ok();
}

}  // namespace trident::cli
