// Shared by `trident export`'s two files (export_command.cc defines them, export_quantized.cc
// uses them too).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "data/tokenizer.h"
#include "export/gguf_model.h"

namespace trident::cli {

// The directories above an output file, created (as mkdir -p).
Status create_parent_dirs(const std::string& path);
// A GGUF export's summary fields: architecture, tokenizer, tensors by type, bytes, notes.
nlohmann::ordered_json gguf_summary(const exporting::GgufExportResult& written, const data::Tokenizer& tokenizer);

}  // namespace trident::cli
