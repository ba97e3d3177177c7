// `trident export`: a checkpoint's model (any layout: whole, or sharded by ZeRO) as a Hugging
// Face model directory (export/hf_writer.h), one safetensors file, a GGUF file for llama.cpp
// (export/gguf_model.h), or an ONNX decoder for ONNX Runtime (export/onnx_model.h). A LoRA run's
// adapters are folded in with --merge-lora.
#include <cstdio>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "adapters/lora.h"
#include "checkpoint/atomic_file.h"
#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/env.h"
#include "cli_checks.h"
#include "commands.h"
#include "export_summary.h"
#include "export/gguf_model.h"
#include "export/hf_writer.h"
#include "export/onnx_model.h"
#include "loading/model_source.h"
#include "loading/quantized_dir.h"
#include "models/registry.h"

namespace trident::cli {

using loading::checkpoint_config;
using loading::resolve_checkpoint;

CLI::App* add_export(CLI::App& app, ExportArgs& a) {
  CLI::App* c = app.add_subcommand(
      "export", "Write a checkpoint's model as a Hugging Face model directory, one safetensors file, a GGUF file "
                "for llama.cpp, or an ONNX model for ONNX Runtime");
  c->add_option("--checkpoint", a.checkpoint,
                "checkpoint directory, a run directory (its latest), or a quantized directory (as GGUF: its Q8_0/Q4_0 "
                "blocks copied)")
      ->required();
  c->add_option("--out", a.out,
                "a directory: config.json and the weights under Hugging Face names, sharded above --max-shard-mb "
                "(from_pretrained loads it); a path ending in .safetensors: the weights alone, in one file; a path ending "
                "in .gguf: a GGUF file llama.cpp runs (--type, with the tokenizer's vocabulary); a path ending in .onnx: an ONNX "
                "decoder with past key/values, as Hugging Face optimum names them, that ONNX Runtime runs (--type)")
      ->required();
  c->add_option("--format", a.format, "hf, safetensors, gguf or onnx (default: from --out's ending)")
      ->check(CLI::IsMember({"hf", "safetensors", "gguf", "onnx"}));
  c->add_option("--type", a.type,
                "GGUF's weight type: f32, f16, q8_0 or q4_0 (GGUF's blocks of 32; norms, biases and GPT-2's position "
                "embedding stay f32, as llama.cpp's converter keeps them); ONNX's: f32, f16 or int8 (linear layers' weights int8 "
                "per output channel, dequantized by DequantizeLinear)");
  c->add_option("--tokenizer", a.tokenizer, "GGUF's vocabulary: a tokenizer name or files (default: the checkpoint "
                                            "config's data.tokenizer)");
  c->add_option("--vocab", a.vocab_dir, "the named tokenizer's files (gpt2: the vocab.json + merges.txt directory)");
  c->add_option("--max-shard-mb", a.max_shard_mb, "largest weight file of a directory (MB)")
      ->check(number_in(0.0, false, 1e6, "(0, 1e6]"));  // a sanity bound (1 TB); inf wrapped to one shard per tensor
  c->add_flag("--merge-lora", a.merge_lora,
              "a LoRA run's checkpoint: write each adapted weight with its adapter folded in (W + alpha/r B A), a "
              "plain model with no adapter (without it: the base alone; the adapters are in <out_dir>/adapter)");
  return c;
}

Status create_parent_dirs(const std::string& path) {
  const std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? Status::ok() : checkpoint::create_dirs(checkpoint::default_env(), parent);
}

nlohmann::ordered_json gguf_summary(const exporting::GgufExportResult& written, const data::Tokenizer& tokenizer) {
  std::map<std::string, int> types;
  for (const auto& [tensor, type] : written.tensors) ++types[exporting::ggml_type_name(type)];
  nlohmann::ordered_json out = {{"architecture", written.architecture}, {"tokenizer", tokenizer.name()},
                                {"tensors", types}, {"bytes", written.bytes}};
  if (!written.notes.empty()) out["notes"] = written.notes;
  return out;
}

Status run_export(const ExportArgs& a) {
  if (loading::is_quantized_dir(a.checkpoint)) return run_export_quantized(a);
  auto dir = resolve_checkpoint(a.checkpoint);
  if (!dir.is_ok()) return dir.status();
  // Writing into the checkpoint being read would replace its own files (model.safetensors,
  // config.json) under its manifest's checksums: the checkpoint would be lost.
  if (const auto out = resolved_path(a.out), in = resolved_path(dir.value()); is_within(out, in)) {
    auto shown = [](const std::string& given, const std::filesystem::path& p) {
      return "'" + given + "'" + (p.string() == given ? "" : " (" + p.string() + ")");
    };
    return Status::invalid("export: --out " + shown(a.out, out) + " is " + (out == in ? "" : "inside ") +
                           "the checkpoint it reads, " + shown(dir.value(), in) +
                           ": writing there would overwrite the checkpoint's own files; choose an --out outside it");
  }
  auto reader = checkpoint::CheckpointReader::open(checkpoint::default_env(), dir.value());
  if (!reader.is_ok()) return reader.status();
  const checkpoint::CheckpointReader& r = reader.value();
  // The model's parameters, in model order, by the logical (single-device) shapes its family
  // states (models/model_shapes.h; the placement table of any layout names them so): not the
  // AdamW state, nor a rank's compression state (Note [Checkpoints from placements] in
  // src/train/checkpoint_pieces.h). Each is read from however many shards it is in, one tensor at
  // a time: the file is streamed, never held whole.
  auto cfg = checkpoint_config(dir.value());
  if (!cfg.is_ok()) return cfg.status();
  std::vector<checkpoint::TensorSpec> specs;
  for (const models::ParameterShape& p : models::model_family(cfg.value().model.arch).shapes(cfg.value().model).parameters) {
    const auto it = r.manifest().tensors.find(p.name);
    if (it == r.manifest().tensors.end())
      return Status::invalid("checkpoint " + dir.value() + " has no tensor '" + p.name + "', a parameter of its model.arch = \"" +
                             cfg.value().model.arch + "\"");
    if (!(it->second.shape == Shape(p.shape)))
      return Status::invalid("checkpoint " + dir.value() + ": tensor '" + p.name + "' has shape " +
                             it->second.shape.str() + "; its config's model has " + Shape(p.shape).str());
    specs.push_back({p.name, it->second.dtype, it->second.shape});
  }
  // A LoRA run's checkpoint: --merge-lora folds each adapter into its base weight (W + s B A,
  // in the weight's layout); without it the base alone is written, and the JSON says so.
  const adapters::LoraOptions& lora = cfg.value().lora;
  if (a.merge_lora && !lora.enabled())
    return Status::invalid("export --merge-lora: the checkpoint " + dir.value() +
                           " has no LoRA adapters (its config's lora.r is 0)");
  const bool in_out = models::model_family(cfg.value().model.arch).linear_weights_in_out;
  int64_t merged = 0;
  auto load = [&](size_t i) -> StatusOr<Tensor> {
    auto w = r.load_tensor(specs[i].name);
    if (!w.is_ok() || !a.merge_lora || !specs[i].name.ends_with(".weight")) return w;
    const std::string layer = specs[i].name.substr(0, specs[i].name.size() - std::string(".weight").size());
    if (!r.has_tensor(layer + ".lora_A.weight")) return w;
    auto la = r.load_tensor(layer + ".lora_A.weight");
    if (!la.is_ok()) return la.status();
    auto lb = r.load_tensor(layer + ".lora_B.weight");
    if (!lb.is_ok()) return lb.status();
    ++merged;
    return adapters::merge_lora_weight(w.value(), la.value(), lb.value(), lora.scaling(), in_out);
  };
  const std::string format = !a.format.empty()               ? a.format
                             : a.out.ends_with(".gguf")        ? "gguf"
                             : a.out.ends_with(".onnx")        ? "onnx"
                             : a.out.ends_with(".safetensors") ? "safetensors"
                                                               : "hf";
  auto add_lora = [&](nlohmann::ordered_json& out) {
    if (a.merge_lora) out["merged_layers"] = merged;
    if (lora.enabled()) out["lora"] = a.merge_lora ? "merged" : "not merged: the base alone (--merge-lora folds the adapters in)";
  };
  const std::string lora_note =
      !lora.enabled() ? "" : a.merge_lora ? ", \"lora\": \"merged\"" : ", \"lora\": \"not merged: the base alone (--merge-lora folds the adapters in)\"";
  if (format == "gguf") {
    auto weights = exporting::parse_gguf_weights(a.type, "export: --type");
    if (!weights.is_ok()) return weights.status();
    auto src = loading::resolve_model_source(dir.value());
    if (!src.is_ok()) return src.status();
    auto tokenizer = loading::load_tokenizer(src.value(), a.tokenizer, a.vocab_dir);
    if (!tokenizer.is_ok()) return tokenizer.status();
    if (Status made = create_parent_dirs(a.out); !made.is_ok()) return made;
    const std::string name = std::filesystem::path(resolved_path(dir.value())).filename().string();
    auto written = exporting::write_gguf_model(a.out, cfg.value().model, specs, load, weights.value(),
                                               *tokenizer.value(), name);
    if (!written.is_ok()) return written.status();
    nlohmann::ordered_json out = {{"checkpoint", dir.value()}, {"out", a.out}, {"format", "gguf"},
                                  {"type", exporting::gguf_weights_name(weights.value())}};
    out.update(gguf_summary(written.value(), *tokenizer.value()));
    add_lora(out);
    std::printf("%s\n", out.dump().c_str());
    return Status::ok();
  }
  if (format == "onnx") {
    // --type defaults to GGUF's f32, which ONNX shares; GGUF's block types are refused by name.
    auto weights = exporting::parse_onnx_weights(a.type, "export --format onnx: --type");
    if (!weights.is_ok()) return weights.status();
    if (Status made = create_parent_dirs(a.out); !made.is_ok()) return made;
    auto written = exporting::write_onnx_model(a.out, cfg.value().model, specs, load, weights.value());
    if (!written.is_ok()) return written.status();
    const exporting::OnnxFileSummary& f = written.value().file;
    nlohmann::ordered_json out = {{"checkpoint", dir.value()}, {"out", a.out}, {"format", "onnx"},
                                  {"architecture", written.value().architecture},
                                  {"type", exporting::onnx_weights_name(weights.value())}, {"opset", f.opset},
                                  {"inputs", f.inputs.size()}, {"outputs", f.outputs.size()}, {"nodes", f.nodes},
                                  {"initializers", f.initializers}, {"bytes", written.value().bytes}};
    if (!f.external_data.empty()) {  // weights over 1 GB: ONNX external data beside the model
      out["external_data"] = f.external_data;
      out["external_bytes"] = written.value().external_bytes;
    }
    add_lora(out);
    std::printf("%s\n", out.dump().c_str());
    return Status::ok();
  }
  if (format == "hf") {  // a Hugging Face model directory
    auto files = exporting::write_hf_model_dir(a.out, cfg.value().model, specs, load,
                                           static_cast<int64_t>(a.max_shard_mb * 1e6));
    if (!files.is_ok()) return files.status();
    std::printf("{\"checkpoint\": \"%s\", \"out\": \"%s\", \"tensors\": %zu, \"files\": %zu%s%s}\n", dir.value().c_str(),
                a.out.c_str(), specs.size(), files.value().size(),
                a.merge_lora ? (", \"merged_layers\": " + std::to_string(merged)).c_str() : "", lora_note.c_str());
    return Status::ok();
  }
  if (Status made = create_parent_dirs(a.out); !made.is_ok()) return made;
  auto out = checkpoint::AtomicFileWriter::create(checkpoint::default_env(), a.out);
  if (!out.is_ok()) return out.status();
  Status s = checkpoint::write_safetensors_streamed(out.value(), specs, load, {{"format", "pt"}});
  if (!s.is_ok()) return s;
  if (!(s = out.value().commit()).is_ok()) return s;
  std::printf("{\"checkpoint\": \"%s\", \"out\": \"%s\", \"tensors\": %zu, \"bytes\": %llu%s}\n", dir.value().c_str(),
              a.out.c_str(), specs.size(), static_cast<unsigned long long>(out.value().size()), lora_note.c_str());
  return Status::ok();
}

}  // namespace trident::cli
