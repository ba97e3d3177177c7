// Hugging Face's safetensors format, read and written exactly
// (https://github.com/huggingface/safetensors, format section of its README):
//
//   [8 bytes]  N, the header length, unsigned little-endian
//   [N bytes]  a UTF-8 JSON object, padded with spaces to a multiple of 8 bytes when written:
//                {"__metadata__": {"key": "value", ...},            (optional, strings only)
//                 "<tensor name>": {"dtype": "F32", "shape": [2, 3],
//                                   "data_offsets": [begin, end]}, ...}
//              offsets are bytes relative to the first byte after the header
//   [rest]     the tensors' bytes, row-major, little-endian, back to back in offset order:
//              the first begins at 0, each begins where the previous ended, the last ends at
//              the end of the file.
//
// Reading validates all of that (plus: no name twice, byte counts agree with dtype x shape, no
// overflow) and returns a Status naming the file, the tensor and the problem. The header can be
// read alone, and tensors are loaded one at a time, each pread straight into its own storage,
// so a tool can stream a file of any size with memory for one tensor.
//
// dtypes: trident's F32, F64, BF16, F16, I32, I64 and U16 load; the format's other dtypes
// (BOOL, U8, I8, I16, U32, U64, F8_E4M3, F8_E5M2) are recognized in headers and listed, but
// loading one is a NotImplemented error naming it. Anything else makes the header invalid.
//
// Not here: checkpoint directories, checksums and atomicity of groups of files
// (checkpoint_dir.h); tensor names of a particular model (models/); dtype conversion on load
// (callers cast). Big-endian hosts are not supported (a static_assert says so).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/atomic_file.h"
#include "checkpoint/env.h"
#include "core/status.h"
#include "core/tensor.h"

namespace trident::checkpoint {

using StringMap = std::map<std::string, std::string>;

struct NamedTensor {
  std::string name;
  Tensor tensor;
};

// "F32" <-> DType::kF32, ... for the dtypes trident has.
const char* safetensors_dtype_name(DType dtype);
std::optional<DType> dtype_from_safetensors(std::string_view name);
// Bytes per element of any dtype the format defines (including those trident lacks), or
// nullopt for a name the format does not define.
std::optional<size_t> safetensors_element_size(std::string_view name);

// ---- writing ----

// The file's first 8 + N bytes for these tensors, in the order the data will follow: see
// Note [Tensor order in a safetensors file]. Throws (ValueError) on an empty, reserved
// ("__metadata__") or repeated name, a non-CPU tensor, or strings that are not UTF-8.
std::string safetensors_header(std::span<const NamedTensor> tensors, const StringMap& metadata);

// Appends a complete safetensors file to `out` (which the caller commits). Non-contiguous
// tensors are written as their contiguous values (one tensor is copied at a time).
Status write_safetensors(AtomicFileWriter& out, std::span<const NamedTensor> tensors,
                         const StringMap& metadata = {});

// What a tensor will be, before its values exist: for writing a file one tensor at a time.
struct TensorSpec {
  std::string name;
  DType dtype;
  Shape shape;
};
std::string safetensors_header_for(std::span<const TensorSpec> specs, const StringMap& metadata);
// Appends a complete safetensors file of `specs` to `out`, asking `load(i)` for tensor i's
// values only when they are written: memory for one tensor at a time (consolidating sharded
// checkpoints). A loaded tensor must have its spec's dtype and shape.
Status write_safetensors_streamed(AtomicFileWriter& out, std::span<const TensorSpec> specs,
                                  const std::function<StatusOr<Tensor>(size_t)>& load,
                                  const StringMap& metadata = {});

// Writes `path` atomically (atomic_file.h).
Status save_safetensors(Env* env, const std::string& path, std::span<const NamedTensor> tensors,
                        const StringMap& metadata = {});

// ---- reading ----

// One tensor as the header describes it.
struct SafetensorsEntry {
  std::string name;
  std::string dtype_name;      // as written in the file: "F32", "I8", ...
  std::optional<DType> dtype;  // nullopt: a dtype trident does not have
  Shape shape;
  uint64_t begin = 0;  // byte offsets relative to the start of the data section
  uint64_t end = 0;
  int64_t numel() const { return shape.product(); }
};

// An open safetensors file whose header has been read and validated. Move-only. Loads may run
// concurrently from several threads (pread has no shared file position).
class SafetensorsReader {
 public:
  static StatusOr<SafetensorsReader> open(Env* env, const std::string& path);

  const std::string& path() const { return file_->path(); }
  // In file order (by offset).
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  const StringMap& metadata() const { return metadata_; }
  // nullptr if the file has no tensor of that name.
  const SafetensorsEntry* find(std::string_view name) const;
  // File offset of the data section (8 + N).
  uint64_t data_start() const { return data_start_; }

  // A new contiguous CPU tensor with the stored shape and values. Errors: no such name (the
  // message lists what the file has), a dtype trident lacks, a read failure.
  StatusOr<Tensor> load(std::string_view name) const;
  // load(), for a floating-point tensor (a model's parameter): a tensor of an integer or
  // boolean dtype (I32, I64, U16, BOOL, ...) is refused naming the file, the tensor, its dtype
  // and the floating ones, rather than converted into numbers that were never weights.
  StatusOr<Tensor> load_floating(std::string_view name) const;
  // Elements [first, first + count) of the stored tensor's row-major flattening, as a 1-D
  // tensor, reading only those bytes (for loading one partition of a larger tensor).
  StatusOr<Tensor> load_elements(std::string_view name, int64_t first, int64_t count) const;

 private:
  SafetensorsReader() = default;
  StatusOr<const SafetensorsEntry*> loadable(std::string_view name) const;

  std::unique_ptr<RandomAccessFile> file_;
  uint64_t data_start_ = 0;
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, size_t, std::less<>> index_;  // name -> position in entries_
  StringMap metadata_;
};

// Every tensor of the file, in file order.
StatusOr<std::vector<NamedTensor>> load_safetensors(Env* env, const std::string& path);

}  // namespace trident::checkpoint
