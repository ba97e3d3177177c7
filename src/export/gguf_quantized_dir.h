// A quantized directory (`trident quantize --scheme int8|int4`, loading/quantized_dir.h) as a GGUF
// file: its Q8_0 and Q4_0 layers copied as they are (export/gguf_model.h), the parameters it keeps
// in full precision in `rest`'s type (f32 by default: as trident runs them).
#pragma once

#include <string>

#include "core/status.h"
#include "data/tokenizer.h"
#include "export/gguf_model.h"

namespace trident::exporting {

StatusOr<GgufExportResult> write_gguf_from_quantized_dir(const std::string& dir, const std::string& path,
                                                         GgufWeights rest, const data::Tokenizer& tokenizer);

}  // namespace trident::exporting
