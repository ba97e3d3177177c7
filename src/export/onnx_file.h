// An ONNX model file: the protobuf serialized, written atomically (checkpoint/atomic_file.h),
// and read back with the same library and checked as ONNX Runtime will need it: the opset, the
// initializers' byte counts against their shapes, every node's inputs defined before the node,
// every graph output produced, standard (default-domain) operators only.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "core/status.h"

namespace onnx {
class ModelProto;
}

namespace trident::exporting {

// One protobuf message holds at most 2 GB (protobuf's limit). Above kOnnxInlineBytes of tensor
// data, the initializers of 1 KB or more go to ONNX external data: one file beside the model,
// "<model file name>.data", each tensor's bytes at its offset (TensorProto.external_data:
// location, offset, length), as onnx.save_model(save_as_external_data=True) writes them;
// ONNX Runtime and onnx.checker read it from the model's directory.
inline constexpr uint64_t kOnnxMaxBytes = (uint64_t{1} << 31) - 1;
inline constexpr uint64_t kOnnxInlineBytes = uint64_t{1} << 30;

struct OnnxFileSummary {
  int64_t ir_version = 0;
  int64_t opset = 0;  // of the default domain
  std::vector<std::string> inputs, outputs;
  int64_t nodes = 0, initializers = 0;
  uint64_t initializer_bytes = 0;  // inline and external
  std::string external_data;       // the external data file's name, "" if none
  int64_t external_tensors = 0;
  std::set<std::string> op_types;
};

struct OnnxWritten {
  uint64_t bytes = 0;           // the model file's
  uint64_t external_bytes = 0;  // the external data file's (0: none written)
};

// Writes `model` to `path` (temporary, synced, renamed; the external data file first, when the
// tensor data is over `inline_bytes`: the model's initializers are moved there). Refuses a
// model file over kOnnxMaxBytes naming its size.
StatusOr<OnnxWritten> write_onnx_file(const std::string& path, onnx::ModelProto& model,
                                      uint64_t inline_bytes = kOnnxInlineBytes);

// Parses `path` and checks it; errors name the file and what is wrong (a truncated file does
// not parse; a tensor's data shorter than its shape, or past the end of its external file; a
// node reading a name nothing defines).
StatusOr<OnnxFileSummary> read_onnx_file(const std::string& path);

}  // namespace trident::exporting
