#include "export/gguf_quantized_dir.h"

#include <filesystem>
#include <map>

#include "loading/model_source.h"
#include "loading/quantized_dir.h"
#include "models/registry.h"

namespace trident::exporting {

StatusOr<GgufExportResult> write_gguf_from_quantized_dir(const std::string& dir, const std::string& path,
                                                         GgufWeights rest, const data::Tokenizer& tokenizer) {
  auto src = loading::resolve_model_source(dir);
  if (!src.is_ok()) return src.status();
  const models::ModelConfig& cfg = src.value().cfg.model;
  std::unique_ptr<models::CausalLM> model = models::build_model(cfg);
  auto applied = loading::load_quantized_dir(dir, *model);
  if (!applied.is_ok()) return applied.status();
  std::map<std::string, std::shared_ptr<const quantization::GgmlWeight>> blocks;
  std::vector<GgufParameter> params;
  for (const quantization::QuantizedParameter& q : applied.value()) {
    auto ggml = std::dynamic_pointer_cast<const quantization::GgmlWeight>(q.weight);
    if (ggml == nullptr)
      return Status::invalid("export --format gguf: " + dir + " is quantized as " + q.weight->scheme() + " ('" +
                             q.param + "'), which GGUF has no type for; export the checkpoint it came from, or "
                             "quantize with --scheme int8 (Q8_0) or int4 (Q4_0)");
    if (!q.tied_to.empty()) {  // the tied head's copy: output.weight, beside the table
      params.push_back({{q.param, q.weight->dtype(), q.weight->shape()}, ggml});
      continue;
    }
    blocks[q.param] = ggml;
  }
  std::vector<Tensor> values;
  std::vector<GgufParameter> ordered;
  for (const auto& [name, p] : model->named_parameters()) {
    const auto it = blocks.find(name);
    ordered.push_back({{name, p.dtype(), p.shape()}, it == blocks.end() ? nullptr : it->second});
    values.push_back(p);
  }
  ordered.insert(ordered.end(), params.begin(), params.end());
  const std::string name = std::filesystem::path(dir).filename().string();
  return write_gguf_model(path, cfg, ordered, [&](size_t i) -> StatusOr<Tensor> { return values.at(i); }, rest,
                          tokenizer, name.empty() ? "trident" : name);
}

}  // namespace trident::exporting
