// GGUF files (version 3), the container llama.cpp reads: a header, typed key/value metadata,
// tensor descriptions, then the tensors' bytes, each at an aligned offset. Written as
// ggml/src/gguf.cpp reads it (little-endian, as every GGUF producer writes it):
//
//   "GGUF" u32 version=3  u64 n_tensors  u64 n_kv
//   n_kv x   { string key, u32 type, value }            string: u64 length + bytes (no NUL)
//   n_tensors x { string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset }
//   zero padding to general.alignment (32 unless the metadata says otherwise)
//   the tensors' bytes, each at data_start + offset, each offset a multiple of the alignment
//
// ne[0] is the fastest-moving dimension: a weight PyTorch holds as (out, in) has ne = {in, out}.
// Quantized types store blocks along ne[0] (Q8_0: 34 bytes per 32 values, Q4_0: 18 bytes),
// so ne[0] must be a multiple of 32 for them.
//
// The reader checks every length against the file's size before reading it, so a truncated or
// corrupt file gets an error naming the file, the byte offset and what was being read, never a
// read past the end or an allocation sized by garbage.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace trident::exporting {

enum class GgufType : uint32_t {
  kUint8 = 0, kInt8 = 1, kUint16 = 2, kInt16 = 3, kUint32 = 4, kInt32 = 5, kFloat32 = 6,
  kBool = 7, kString = 8, kArray = 9, kUint64 = 10, kInt64 = 11, kFloat64 = 12,
};
const char* gguf_type_name(GgufType t);

// One metadata value. Integers of every width are held in `integer` (u64 by its bits), reals
// in `real`; arrays (of one element type, not nested) in the vectors.
struct GgufValue {
  GgufType type = GgufType::kUint32;
  GgufType element = GgufType::kUint32;  // an array's element type
  int64_t integer = 0;
  double real = 0.0;
  std::string text;
  std::vector<int64_t> integers;  // integer and bool arrays
  std::vector<double> reals;
  std::vector<std::string> texts;

  static GgufValue u32(uint32_t v);
  static GgufValue i32(int32_t v);
  static GgufValue f32(float v);
  static GgufValue boolean(bool v);
  static GgufValue string(std::string v);
  static GgufValue strings(std::vector<std::string> v);
  static GgufValue i32s(const std::vector<int32_t>& v);
  static GgufValue f32s(const std::vector<float>& v);
  // The value for messages: 3, 1e-05, "llama", [5 strings].
  std::string str() const;
};

using GgufMetadata = std::vector<std::pair<std::string, GgufValue>>;

// The ggml tensor types trident writes and reads.
enum class GgmlType : uint32_t { kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ8_0 = 8 };
const char* ggml_type_name(GgmlType t);  // "F32", "F16", "Q4_0", "Q8_0"
// Bytes of a tensor of `ne` in `t`; an error when ne[0] is not a whole number of blocks.
StatusOr<uint64_t> ggml_tensor_bytes(GgmlType t, const std::vector<int64_t>& ne);

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> ne;  // ne[0] fastest
  GgmlType type = GgmlType::kF32;
  uint64_t offset = 0;  // from the start of the data section
  uint64_t bytes = 0;
};

inline constexpr uint32_t kGgufVersion = 3;
inline constexpr uint64_t kGgufAlignment = 32;

// Writes `path` (to a temporary name, synced, renamed: checkpoint/atomic_file.h): the metadata in
// order, then the tensors in order; data(i) gives tensor i's bytes, exactly ggml_tensor_bytes of
// it, and is called once per tensor, in order, so a model is streamed through, never held whole.
// Returns the file's size.
StatusOr<uint64_t> write_gguf(const std::string& path, const GgufMetadata& metadata,
                              const std::vector<GgufTensorInfo>& tensors,
                              const std::function<StatusOr<std::string>(size_t)>& data);

struct GgufFile {
  std::string path;
  uint32_t version = 0;
  GgufMetadata metadata;
  std::vector<GgufTensorInfo> tensors;
  uint64_t alignment = kGgufAlignment;
  uint64_t data_start = 0;  // the data section's offset in the file
  uint64_t file_size = 0;

  const GgufValue* find(const std::string& key) const;
  const GgufTensorInfo* tensor(const std::string& name) const;
};

// Reads and checks a file's header, metadata and tensor descriptions: the magic, the version
// (2 or 3), every string and array length within the file, known value and tensor types,
// unique keys and tensor names, offsets aligned, and every tensor's bytes inside the file (a
// truncated file names the first tensor that does not fit and the bytes it lacks).
StatusOr<GgufFile> read_gguf(const std::string& path);
// Tensor i's bytes.
StatusOr<std::string> read_gguf_tensor(const GgufFile& file, size_t i);

}  // namespace trident::exporting
