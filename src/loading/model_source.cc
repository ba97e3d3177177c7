#include "loading/model_source.h"

#include <algorithm>
#include <filesystem>

#include "adapters/lora.h"
#include "adapters/peft_files.h"
#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/env.h"
#include "loading/quantized_dir.h"
#include "models/registry.h"
#include "train/hf_model_dir.h"
#include "train/tokenizer_factory.h"
#include "train/trainer.h"

namespace trident::loading {

// One checkpoint directory: its DONE marker, or (an interrupted write) its manifest alone.
bool is_checkpoint_dir(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;  // unreadable: not one (what reads it next says why)
  return fs::exists(fs::path(path) / checkpoint::kDoneFileName, ec) ||
         fs::exists(fs::path(path) / checkpoint::kManifestFileName, ec);
}

// A run directory (train.out_dir: its latest checkpoint) or one checkpoint directory. A
// checkpoint without DONE is returned as it is: CheckpointReader::open refuses it as incomplete.
StatusOr<std::string> resolve_checkpoint(const std::string& path) {
  if (is_checkpoint_dir(path)) return path;
  auto latest = checkpoint::find_latest_checkpoint(checkpoint::default_env(), path);
  if (!latest.is_ok()) return latest.status();
  // Step directories without DONE past the newest complete one (interrupted writes): named, not
  // passed over in silence.
  std::string incomplete;
  if (auto names = checkpoint::incomplete_after_latest(checkpoint::default_env(), path); names.is_ok())
    for (const std::string& name : names.value()) incomplete += (incomplete.empty() ? "" : ", ") + name;
  const std::string skipped = incomplete + ": incomplete, without a " + checkpoint::kDoneFileName + " marker";
  if (!latest.value())
    return Status::io_error("no complete checkpoint in '" + path + "'" +
                            (incomplete.empty() ? "" : " (" + skipped + ")"));
  if (!incomplete.empty())
    std::fprintf(stderr, "%s: using %s; skipped the newer %s\n", path.c_str(), latest.value()->c_str(),
                 skipped.c_str());
  return *latest.value();
}

// The training config saved in a checkpoint.
StatusOr<train::TrainConfig> checkpoint_config(const std::string& dir) {
  auto reader = checkpoint::CheckpointReader::open(checkpoint::default_env(), dir);
  if (!reader.is_ok()) return reader.status();
  auto text = reader.value().read_file("config.toml");
  if (!text.is_ok()) return text.status();
  train::TrainConfig cfg;
  config::ConfigTree tree;
  cfg.bind(tree);
  Status s = tree.load_toml_string(text.value(), dir + "/config.toml");
  if (!s.is_ok()) return s;
  return cfg;
}


StatusOr<ModelSource> resolve_model_source(const std::string& path) {
  if (is_quantized_dir(path)) {
    auto info = read_quantized_dir_info(path);
    if (!info.is_ok()) return info.status();
    const std::string file = (std::filesystem::path(path) / "config.toml").string();
    auto text = checkpoint::read_file(checkpoint::default_env(), file);
    if (!text.is_ok()) return text.status();
    ModelSource src{path, false, true, info.value().tokenizer_in_dir, {}};
    config::ConfigTree tree;
    src.cfg.bind(tree);
    if (Status s = tree.load_toml_string(text.value(), file); !s.is_ok()) return s;
    return src;
  }
  // A trident checkpoint carries a config.json too, but is_hf_model_dir knows it by its DONE
  // marker: its weights may be sharded (ZeRO, tensor/pipeline boxes), so it is read as a checkpoint.
  // One whose write was interrupted (a manifest, no DONE) is refused as incomplete, not read as a
  // model directory without the checkpoint's checks.
  if (!is_checkpoint_dir(path) && train::is_hf_model_dir(path)) {
    ModelSource src{path, true, false, false, {}};
    auto model = train::hf_model_config(path, src.cfg.model);
    if (!model.is_ok()) return model.status();
    src.cfg.model = model.value();
    src.cfg.data.seq_len = std::min(src.cfg.data.seq_len, src.cfg.model.block_size);
    return src;
  }
  auto dir = resolve_checkpoint(path);
  if (!dir.is_ok())
    return Status::io_error(dir.status().message() + " (nor is it a Hugging Face model directory: no config.json)");
  auto cfg = checkpoint_config(dir.value());
  if (!cfg.is_ok()) return cfg.status();
  return ModelSource{dir.value(), false, false, false, cfg.value()};
}

StatusOr<std::unique_ptr<models::CausalLM>> load_model(const ModelSource& src, const std::string& adapter,
                                                       std::vector<std::string>* quantized) {
  std::unique_ptr<models::CausalLM> model = models::build_model(src.cfg.model);
  if (src.quantized) {
    auto applied = load_quantized_dir(src.dir, *model);
    if (!applied.is_ok()) return applied.status();
    if (quantized != nullptr)
      for (const quantization::QuantizedParameter& q : applied.value()) quantized->push_back(q.param);
  } else if (src.hf) {
    if (Status s = train::load_hf_weights(*model, src.dir); !s.is_ok()) return s;
  } else {
    if (src.cfg.lora.enabled()) (void)adapters::apply_lora(*model, src.cfg.lora);
    auto reader = checkpoint::CheckpointReader::open(checkpoint::default_env(), src.dir);
    if (!reader.is_ok()) return reader.status();
    if (Status s = train::load_checkpoint_weights(model->named_parameters(), reader.value()); !s.is_ok()) return s;
  }
  if (!adapter.empty()) {
    if (src.cfg.lora.enabled())
      return Status::invalid("--adapter " + adapter + ": the checkpoint " + src.dir +
                             " is a LoRA run's and carries its own adapters; apply another adapter to a base model");
    auto read = adapters::read_peft_adapter(adapter);
    if (!read.is_ok()) return read.status();
    auto options = adapters::lora_options_for(read.value(), {});
    if (!options.is_ok()) return options.status();
    try {
      (void)adapters::apply_lora(*model, options.value(), read.value().targets);
    } catch (const std::exception& e) {
      return Status::invalid("--adapter " + adapter + ": " + e.what());
    }
    if (Status s = adapters::load_peft_weights(*model, read.value()); !s.is_ok()) return s;
  }
  model->eval();
  return model;
}

StatusOr<std::unique_ptr<data::Tokenizer>> load_tokenizer(const ModelSource& src, const std::string& tokenizer,
                                                          const std::string& vocab_dir) {
  const train::TrainConfig& cfg = src.cfg;
  // A model directory carries its tokenizer (tokenizer.json, tokenizer.model, ...) unless told otherwise.
  const bool own_files = src.hf || src.tokenizer_in_dir;
  const std::string spec = !tokenizer.empty() ? tokenizer : own_files ? src.dir : cfg.data.tokenizer;
  auto tok = train::make_tokenizer(spec, vocab_dir.empty() && !own_files ? cfg.data.vocab_dir : vocab_dir);
  if (!tok.is_ok()) {
    if (tokenizer.empty() && own_files)
      return Status::invalid(tok.status().message() + "; name the model's tokenizer with --tokenizer");
    return tok.status();
  }
  if (tok.value()->vocab_size() > cfg.model.vocab_size)
    return Status::invalid("the tokenizer " + tok.value()->name() + " has " + std::to_string(tok.value()->vocab_size()) +
                           " ids, more than the model's vocab_size " + std::to_string(cfg.model.vocab_size));
  return std::move(tok.value());
}

}  // namespace trident::loading
