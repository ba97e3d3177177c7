// `trident quantize`: loads a model as `sample` does, quantizes its linear layers
// (quantization/quantize_layers.h) and writes a quantized directory (loading/quantized_dir.h).
#include <chrono>
#include <cstdio>

#include "commands.h"
#include "core/check.h"
#include "loading/model_source.h"
#include "loading/quantized_dir.h"
#include "quantization/quantize_layers.h"
#include "quantization/scheme.h"

namespace trident::cli {

CLI::App* add_quantize(CLI::App& app, QuantizeArgs& a) {
  std::string schemes;
  for (const quantization::QuantScheme& s : quantization::quant_schemes())
    schemes += "\n  " + s.name + ": " + s.description;
  CLI::App* c = app.add_subcommand(
      "quantize", "Store a model's linear layers in int8 or int4 (GGUF's Q8_0, Q4_0) for sample, eval and serve");
  c->add_option("--checkpoint", a.checkpoint,
                "checkpoint directory, a run directory (its latest), or a Hugging Face model directory")
      ->required();
  c->add_option("--scheme", a.scheme, "how weights are stored:" + schemes)->required();
  c->add_option("--out", a.out, "the quantized directory to write")->required();
  c->add_option_function<std::string>(
      "--skip", [&a](const std::string& v) { a.skip = v; },
                "linear layers kept in full precision, comma-separated: a name matches a layer whose path ends with it, "
                "'*' and '?' match over the whole path; \"lm_head\" is the LM head, tied or not; \"\" none (default: "
                "nothing for int8, whose Q8_0 blocks take the head too, as llama.cpp's Q8_0 files; lm_head for the others; "
                "embeddings always stay)");
  return c;
}

Status run_quantize(const QuantizeArgs& a) {
  const quantization::QuantScheme* scheme = quantization::find_quant_scheme(a.scheme);
  if (scheme == nullptr)
    return Status::invalid("quantize: --scheme " + a.scheme + " is not a scheme (allowed: " +
                           quantization::quant_scheme_names() + ")");
  if (loading::is_quantized_dir(a.checkpoint))
    return Status::invalid("quantize: " + a.checkpoint + " is a quantized directory already; quantize the model it "
                           "came from");
  auto src = loading::resolve_model_source(a.checkpoint);
  if (!src.is_ok()) return src.status();
  if (const auto out = resolved_path(a.out), in = resolved_path(src.value().dir); is_within(out, in) || is_within(in, out))
    return Status::invalid("quantize: --out " + a.out + " and the model it reads, " + src.value().dir +
                           ", overlap: writing there would overwrite the model's own files; choose another --out");
  train::TrainConfig cfg = src.value().cfg;
  if (cfg.lora.enabled() || cfg.quantization.enabled())
    return Status::invalid("quantize: " + src.value().dir + " is a LoRA run's checkpoint (lora.r = " +
                           std::to_string(cfg.lora.r) + "); fold its adapters into the base first: trident export "
                           "--merge-lora --out DIR, then quantize DIR");
  const auto t0 = std::chrono::steady_clock::now();
  auto model = loading::load_model(src.value(), "");
  if (!model.is_ok()) return model.status();
  const std::string skip = a.skip.value_or(scheme->default_skip);
  std::vector<quantization::QuantizedParameter> layers;
  try {
    layers = quantization::quantize_layers(*model.value(), *scheme, skip, "--skip");
  } catch (const Error& e) {
    return Status::invalid("quantize --scheme " + a.scheme + ": " + e.message());
  }
  int64_t params = 0, bytes = 0;
  for (const auto& l : layers) {
    params += l.weight->numel();
    bytes += l.weight->bytes();
  }
  cfg.parallel = {};  // the directory is read by one process
  cfg.train.init_from.clear();
  loading::QuantizedDirWrite w{a.out, src.value().dir, &cfg, scheme, skip, src.value().hf ? src.value().dir : ""};
  auto written = loading::write_quantized_dir(w, *model.value(), layers);
  if (!written.is_ok()) return written.status();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("{\"checkpoint\": \"%s\", \"out\": \"%s\", \"scheme\": \"%s\", \"block_format\": \"%s\", "
              "\"quantized_layers\": %zu, \"quantized_parameters\": %lld, \"quantized_bytes\": %lld, "
              "\"file_bytes\": %llu, \"seconds\": %.2f}\n",
              src.value().dir.c_str(), a.out.c_str(), scheme->name.c_str(), scheme->format.c_str(), layers.size(),
              static_cast<long long>(params), static_cast<long long>(bytes),
              static_cast<unsigned long long>(written.value()), seconds);
  return Status::ok();
}

}  // namespace trident::cli
