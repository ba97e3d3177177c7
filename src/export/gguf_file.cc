#include "export/gguf_file.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "checkpoint/atomic_file.h"
#include "checkpoint/env.h"
#include "kernels/cpu/ggml_blocks.h"

namespace trident::exporting {

static_assert(std::endian::native == std::endian::little, "GGUF is written little-endian, as this host stores");

const char* gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::kUint8: return "uint8";
    case GgufType::kInt8: return "int8";
    case GgufType::kUint16: return "uint16";
    case GgufType::kInt16: return "int16";
    case GgufType::kUint32: return "uint32";
    case GgufType::kInt32: return "int32";
    case GgufType::kFloat32: return "float32";
    case GgufType::kBool: return "bool";
    case GgufType::kString: return "string";
    case GgufType::kArray: return "array";
    case GgufType::kUint64: return "uint64";
    case GgufType::kInt64: return "int64";
    case GgufType::kFloat64: return "float64";
  }
  return "unknown";
}

namespace {

// Bytes of a scalar of type t; 0 for strings and arrays (variable), -1 for an unknown type.
int scalar_bytes(uint32_t t) {
  switch (static_cast<GgufType>(t)) {
    case GgufType::kUint8: case GgufType::kInt8: case GgufType::kBool: return 1;
    case GgufType::kUint16: case GgufType::kInt16: return 2;
    case GgufType::kUint32: case GgufType::kInt32: case GgufType::kFloat32: return 4;
    case GgufType::kUint64: case GgufType::kInt64: case GgufType::kFloat64: return 8;
    case GgufType::kString: case GgufType::kArray: return 0;
  }
  return -1;
}
bool is_real(GgufType t) { return t == GgufType::kFloat32 || t == GgufType::kFloat64; }

}  // namespace

GgufValue GgufValue::u32(uint32_t v) { GgufValue x; x.type = GgufType::kUint32; x.integer = v; return x; }
GgufValue GgufValue::i32(int32_t v) { GgufValue x; x.type = GgufType::kInt32; x.integer = v; return x; }
GgufValue GgufValue::f32(float v) { GgufValue x; x.type = GgufType::kFloat32; x.real = v; return x; }
GgufValue GgufValue::boolean(bool v) { GgufValue x; x.type = GgufType::kBool; x.integer = v; return x; }
GgufValue GgufValue::string(std::string v) { GgufValue x; x.type = GgufType::kString; x.text = std::move(v); return x; }
GgufValue GgufValue::strings(std::vector<std::string> v) {
  GgufValue x;
  x.type = GgufType::kArray, x.element = GgufType::kString, x.texts = std::move(v);
  return x;
}
GgufValue GgufValue::i32s(const std::vector<int32_t>& v) {
  GgufValue x;
  x.type = GgufType::kArray, x.element = GgufType::kInt32, x.integers.assign(v.begin(), v.end());
  return x;
}
GgufValue GgufValue::f32s(const std::vector<float>& v) {
  GgufValue x;
  x.type = GgufType::kArray, x.element = GgufType::kFloat32, x.reals.assign(v.begin(), v.end());
  return x;
}

std::string GgufValue::str() const {
  std::ostringstream os;
  if (type == GgufType::kArray) {
    const size_t n = element == GgufType::kString ? texts.size() : is_real(element) ? reals.size() : integers.size();
    os << "[" << n << " " << gguf_type_name(element) << "]";
  } else if (type == GgufType::kString) {
    os << '"' << text << '"';
  } else if (is_real(type)) {
    os << real;
  } else if (type == GgufType::kBool) {
    os << (integer ? "true" : "false");
  } else if (type == GgufType::kUint64) {
    os << static_cast<uint64_t>(integer);
  } else {
    os << integer;
  }
  return os.str();
}

const char* ggml_type_name(GgmlType t) {
  switch (t) {
    case GgmlType::kF32: return "F32";
    case GgmlType::kF16: return "F16";
    case GgmlType::kQ4_0: return "Q4_0";
    case GgmlType::kQ8_0: return "Q8_0";
  }
  return "unknown";
}

StatusOr<uint64_t> ggml_tensor_bytes(GgmlType t, const std::vector<int64_t>& ne) {
  uint64_t rows = 1;
  for (size_t d = 1; d < ne.size(); ++d) rows *= static_cast<uint64_t>(ne[d]);
  const uint64_t n0 = ne.empty() ? 1 : static_cast<uint64_t>(ne[0]);
  switch (t) {
    case GgmlType::kF32: return rows * n0 * 4;
    case GgmlType::kF16: return rows * n0 * 2;
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_0: {
      namespace k = kernels::cpu;
      const uint64_t block = static_cast<uint64_t>(k::kGgmlBlock);
      if (n0 % block != 0)
        return Status::invalid(std::string(ggml_type_name(t)) + " stores blocks of 32 values along ne[0], which is " +
                               std::to_string(n0));
      // ggml's block_q8_0 / block_q4_0: an fp16 scale, then the codes.
      const auto codes = k::ggml_code_bytes(t == GgmlType::kQ8_0 ? k::GgmlBlockType::kQ8_0 : k::GgmlBlockType::kQ4_0);
      return rows * (n0 / block) * (2 + static_cast<uint64_t>(codes));
    }
  }
  return Status::invalid("unknown ggml type " + std::to_string(static_cast<uint32_t>(t)));
}

namespace {

void put_u32(std::string& out, uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); }
void put_u64(std::string& out, uint64_t v) { out.append(reinterpret_cast<const char*>(&v), 8); }
void put_string(std::string& out, const std::string& s) {
  put_u64(out, s.size());
  out += s;
}
void put_scalar(std::string& out, GgufType t, int64_t integer, double real) {
  switch (t) {
    case GgufType::kFloat32: {
      const float f = static_cast<float>(real);
      out.append(reinterpret_cast<const char*>(&f), 4);
      return;
    }
    case GgufType::kFloat64: out.append(reinterpret_cast<const char*>(&real), 8); return;
    default: out.append(reinterpret_cast<const char*>(&integer), static_cast<size_t>(scalar_bytes(static_cast<uint32_t>(t))));
  }
}
void put_value(std::string& out, const GgufValue& v) {
  put_u32(out, static_cast<uint32_t>(v.type));
  if (v.type == GgufType::kString) return put_string(out, v.text);
  if (v.type != GgufType::kArray) return put_scalar(out, v.type, v.integer, v.real);
  put_u32(out, static_cast<uint32_t>(v.element));
  if (v.element == GgufType::kString) {
    put_u64(out, v.texts.size());
    for (const std::string& s : v.texts) put_string(out, s);
  } else if (is_real(v.element)) {
    put_u64(out, v.reals.size());
    for (double r : v.reals) put_scalar(out, v.element, 0, r);
  } else {
    put_u64(out, v.integers.size());
    for (int64_t i : v.integers) put_scalar(out, v.element, i, 0.0);
  }
}
uint64_t aligned(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

}  // namespace

StatusOr<uint64_t> write_gguf(const std::string& path, const GgufMetadata& metadata,
                              const std::vector<GgufTensorInfo>& tensors,
                              const std::function<StatusOr<std::string>(size_t)>& data) {
  std::string head = "GGUF";
  put_u32(head, kGgufVersion);
  put_u64(head, tensors.size());
  put_u64(head, metadata.size());
  for (const auto& [key, value] : metadata) {
    put_string(head, key);
    put_value(head, value);
  }
  std::vector<uint64_t> offsets, sizes;
  uint64_t offset = 0;
  for (const GgufTensorInfo& t : tensors) {
    auto bytes = ggml_tensor_bytes(t.type, t.ne);
    if (!bytes.is_ok()) return Status::invalid(path + ": tensor '" + t.name + "': " + bytes.status().message());
    put_string(head, t.name);
    put_u32(head, static_cast<uint32_t>(t.ne.size()));
    for (int64_t n : t.ne) put_u64(head, static_cast<uint64_t>(n));
    put_u32(head, static_cast<uint32_t>(t.type));
    put_u64(head, offset);
    offsets.push_back(offset);
    sizes.push_back(bytes.value());
    offset = aligned(offset + bytes.value(), kGgufAlignment);
  }
  head.resize(aligned(head.size(), kGgufAlignment), '\0');
  auto out = checkpoint::AtomicFileWriter::create(checkpoint::default_env(), path);
  if (!out.is_ok()) return out.status();
  if (Status s = out.value().append(head); !s.is_ok()) return s;
  const uint64_t data_start = head.size();
  for (size_t i = 0; i < tensors.size(); ++i) {
    auto bytes = data(i);
    if (!bytes.is_ok()) return bytes.status();
    if (bytes.value().size() != sizes[i])
      return Status::error(ErrorKind::kInternal, path + ": tensor '" + tensors[i].name + "' came as " +
                              std::to_string(bytes.value().size()) + " bytes; its " + ggml_type_name(tensors[i].type) +
                              " shape needs " + std::to_string(sizes[i]));
    if (Status s = out.value().append(bytes.value()); !s.is_ok()) return s;
    const uint64_t end = data_start + offsets[i] + sizes[i];
    const uint64_t pad = (i + 1 < tensors.size() ? data_start + offsets[i + 1] : aligned(end, kGgufAlignment)) - end;
    if (Status s = out.value().append(std::string(pad, '\0')); !s.is_ok()) return s;
  }
  const uint64_t size = out.value().size();
  if (Status s = out.value().commit(); !s.is_ok()) return s;
  return size;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  for (const auto& [k, v] : metadata)
    if (k == key) return &v;
  return nullptr;
}

const GgufTensorInfo* GgufFile::tensor(const std::string& name) const {
  for (const GgufTensorInfo& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

namespace {

// Reads the head of a GGUF file with every length checked against the file's size.
class Reader {
 public:
  Reader(std::ifstream& in, std::string path, uint64_t size) : in_(in), path_(std::move(path)), size_(size) {}
  uint64_t pos() const { return pos_; }

  Status bytes(void* out, uint64_t n, const std::string& what) {
    if (n > size_ - pos_)
      return Status::invalid(path_ + ": truncated: " + what + " needs " + std::to_string(n) + " bytes at offset " +
                             std::to_string(pos_) + ", but the file ends at " + std::to_string(size_));
    in_.read(static_cast<char*>(out), static_cast<std::streamsize>(n));
    if (!in_) return Status::io_error(path_ + ": read failed at offset " + std::to_string(pos_));
    pos_ += n;
    return Status::ok();
  }
  template <class T>
  StatusOr<T> scalar(const std::string& what) {
    T v{};
    if (Status s = bytes(&v, sizeof v, what); !s.is_ok()) return s;
    return v;
  }
  StatusOr<std::string> string(const std::string& what) {
    auto n = scalar<uint64_t>(what + "'s length");
    if (!n.is_ok()) return n.status();
    if (n.value() > size_ - pos_)
      return Status::invalid(path_ + ": " + what + " at offset " + std::to_string(pos_) + " claims " +
                             std::to_string(n.value()) + " bytes, past the end of the file (" + std::to_string(size_) +
                             " bytes)");
    std::string s(n.value(), '\0');
    if (Status st = bytes(s.data(), n.value(), what); !st.is_ok()) return st;
    return s;
  }
  // A scalar of type t into v (integer or real).
  Status scalar_into(uint32_t t, GgufValue& v, bool array, const std::string& what) {
    const int n = scalar_bytes(t);
    const auto type = static_cast<GgufType>(t);
    unsigned char raw[8] = {};
    if (Status s = bytes(raw, static_cast<uint64_t>(n), what); !s.is_ok()) return s;
    int64_t i = 0;
    double r = 0.0;
    switch (type) {
      case GgufType::kUint8: case GgufType::kBool: i = raw[0]; break;
      case GgufType::kInt8: i = static_cast<int8_t>(raw[0]); break;
      case GgufType::kUint16: { uint16_t x; std::memcpy(&x, raw, 2); i = x; break; }
      case GgufType::kInt16: { int16_t x; std::memcpy(&x, raw, 2); i = x; break; }
      case GgufType::kUint32: { uint32_t x; std::memcpy(&x, raw, 4); i = x; break; }
      case GgufType::kInt32: { int32_t x; std::memcpy(&x, raw, 4); i = x; break; }
      case GgufType::kFloat32: { float x; std::memcpy(&x, raw, 4); r = x; break; }
      case GgufType::kFloat64: std::memcpy(&r, raw, 8); break;
      default: std::memcpy(&i, raw, 8); break;  // u64, i64
    }
    if (array) {
      if (is_real(type)) v.reals.push_back(r);
      else v.integers.push_back(i);
    } else {
      v.integer = i, v.real = r;
    }
    return Status::ok();
  }
  StatusOr<GgufValue> value(const std::string& key) {
    const std::string what = "the value of '" + key + "'";
    auto t = scalar<uint32_t>(what + "'s type");
    if (!t.is_ok()) return t.status();
    GgufValue v;
    if (scalar_bytes(t.value()) < 0)
      return Status::invalid(path_ + ": '" + key + "' has value type " + std::to_string(t.value()) +
                             ", which GGUF does not define (0-12)");
    v.type = static_cast<GgufType>(t.value());
    if (v.type == GgufType::kString) {
      auto s = string(what);
      if (!s.is_ok()) return s.status();
      v.text = std::move(s.value());
      return v;
    }
    if (v.type != GgufType::kArray) {
      if (Status s = scalar_into(t.value(), v, false, what); !s.is_ok()) return s;
      return v;
    }
    auto et = scalar<uint32_t>(what + "'s element type");
    if (!et.is_ok()) return et.status();
    if (scalar_bytes(et.value()) < 0 || static_cast<GgufType>(et.value()) == GgufType::kArray)
      return Status::invalid(path_ + ": '" + key + "' is an array of element type " + std::to_string(et.value()) +
                             " (allowed: scalars and strings; arrays of arrays are not read)");
    v.element = static_cast<GgufType>(et.value());
    auto n = scalar<uint64_t>(what + "'s count");
    if (!n.is_ok()) return n.status();
    // Each element takes at least one byte (a string its 8-byte length): a count past what the
    // rest of the file can hold is corrupt, and refused before anything is reserved for it.
    const uint64_t least = v.element == GgufType::kString ? 8 : static_cast<uint64_t>(scalar_bytes(et.value()));
    if (n.value() > (size_ - pos_) / least)
      return Status::invalid(path_ + ": '" + key + "' claims " + std::to_string(n.value()) + " elements at offset " +
                             std::to_string(pos_) + ", more than the rest of the file can hold");
    for (uint64_t k = 0; k < n.value(); ++k) {
      const std::string elem = what + "'s element " + std::to_string(k);
      if (v.element == GgufType::kString) {
        auto s = string(elem);
        if (!s.is_ok()) return s.status();
        v.texts.push_back(std::move(s.value()));
      } else if (Status s = scalar_into(et.value(), v, true, elem); !s.is_ok()) {
        return s;
      }
    }
    return v;
  }

 private:
  std::ifstream& in_;
  std::string path_;
  uint64_t size_ = 0, pos_ = 0;
};

}  // namespace

StatusOr<GgufFile> read_gguf(const std::string& path) {
  GgufFile f;
  f.path = path;
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::io_error("cannot open '" + path + "'");
  in.seekg(0, std::ios::end);
  f.file_size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  Reader r(in, path, f.file_size);
  char magic[4];
  if (Status s = r.bytes(magic, 4, "the magic \"GGUF\""); !s.is_ok()) return s;
  if (std::memcmp(magic, "GGUF", 4) != 0)
    return Status::invalid(path + ": not a GGUF file (its first 4 bytes are not \"GGUF\")");
  auto version = r.scalar<uint32_t>("the version");
  if (!version.is_ok()) return version.status();
  f.version = version.value();
  if (f.version != 2 && f.version != 3)
    return Status::invalid(path + ": GGUF version " + std::to_string(f.version) + "; allowed: 2, 3");
  auto n_tensors = r.scalar<uint64_t>("the tensor count");
  if (!n_tensors.is_ok()) return n_tensors.status();
  auto n_kv = r.scalar<uint64_t>("the metadata count");
  if (!n_kv.is_ok()) return n_kv.status();
  // A key takes at least 12 bytes (its length and type), a tensor description at least 24.
  if (n_kv.value() > f.file_size / 12 || n_tensors.value() > f.file_size / 24)
    return Status::invalid(path + ": the header claims " + std::to_string(n_kv.value()) + " keys and " +
                           std::to_string(n_tensors.value()) + " tensors, more than a file of " +
                           std::to_string(f.file_size) + " bytes can describe");
  std::set<std::string> keys;
  for (uint64_t k = 0; k < n_kv.value(); ++k) {
    auto key = r.string("key " + std::to_string(k));
    if (!key.is_ok()) return key.status();
    if (!keys.insert(key.value()).second) return Status::invalid(path + ": the key '" + key.value() + "' appears twice");
    auto value = r.value(key.value());
    if (!value.is_ok()) return value.status();
    f.metadata.emplace_back(key.value(), std::move(value.value()));
  }
  if (const GgufValue* a = f.find("general.alignment")) {
    if (a->type != GgufType::kUint32 || a->integer == 0 || (a->integer & (a->integer - 1)) != 0)
      return Status::invalid(path + ": general.alignment = " + a->str() + "; allowed: a uint32 power of two");
    f.alignment = static_cast<uint64_t>(a->integer);
  }
  std::set<std::string> names;
  for (uint64_t k = 0; k < n_tensors.value(); ++k) {
    GgufTensorInfo t;
    auto name = r.string("tensor " + std::to_string(k) + "'s name");
    if (!name.is_ok()) return name.status();
    t.name = name.value();
    if (!names.insert(t.name).second) return Status::invalid(path + ": the tensor '" + t.name + "' appears twice");
    const std::string what = "tensor '" + t.name + "'";
    auto dims = r.scalar<uint32_t>(what + "'s dimension count");
    if (!dims.is_ok()) return dims.status();
    if (dims.value() > 4)
      return Status::invalid(path + ": " + what + " has " + std::to_string(dims.value()) + " dimensions; allowed: 0-4");
    for (uint32_t d = 0; d < dims.value(); ++d) {
      auto n = r.scalar<int64_t>(what + "'s ne[" + std::to_string(d) + "]");
      if (!n.is_ok()) return n.status();
      if (n.value() < 0 || n.value() > (int64_t{1} << 40))
        return Status::invalid(path + ": " + what + " has ne[" + std::to_string(d) + "] = " + std::to_string(n.value()));
      t.ne.push_back(n.value());
    }
    auto type = r.scalar<uint32_t>(what + "'s type");
    if (!type.is_ok()) return type.status();
    t.type = static_cast<GgmlType>(type.value());
    if (std::string(ggml_type_name(t.type)) == "unknown")
      return Status::invalid(path + ": " + what + " has ggml type " + std::to_string(type.value()) +
                             "; trident reads F32 (0), F16 (1), Q4_0 (2) and Q8_0 (8)");
    auto offset = r.scalar<uint64_t>(what + "'s offset");
    if (!offset.is_ok()) return offset.status();
    t.offset = offset.value();
    if (t.offset % f.alignment != 0)
      return Status::invalid(path + ": " + what + "'s offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
                             std::to_string(f.alignment));
    uint64_t elements = 1;
    for (int64_t n : t.ne) {
      if (n != 0 && elements > (uint64_t{1} << 50) / static_cast<uint64_t>(n))
        return Status::invalid(path + ": " + what + " has more elements than any file holds");
      elements *= static_cast<uint64_t>(n);
    }
    auto bytes = ggml_tensor_bytes(t.type, t.ne);
    if (!bytes.is_ok()) return Status::invalid(path + ": " + what + ": " + bytes.status().message());
    t.bytes = bytes.value();
    f.tensors.push_back(std::move(t));
  }
  f.data_start = aligned(r.pos(), f.alignment);
  for (const GgufTensorInfo& t : f.tensors) {
    if (t.offset > f.file_size || t.bytes > f.file_size - std::min(f.file_size, f.data_start + t.offset))
      return Status::invalid(path + ": truncated: tensor '" + t.name + "' (" + ggml_type_name(t.type) + ", " +
                             std::to_string(t.bytes) + " bytes) needs bytes up to " +
                             std::to_string(f.data_start + t.offset + t.bytes) + ", but the file has " +
                             std::to_string(f.file_size));
  }
  return f;
}

StatusOr<std::string> read_gguf_tensor(const GgufFile& file, size_t i) {
  const GgufTensorInfo& t = file.tensors.at(i);
  std::ifstream in(file.path, std::ios::binary);
  if (!in) return Status::io_error("cannot open '" + file.path + "'");
  std::string bytes(t.bytes, '\0');
  in.seekg(static_cast<std::streamoff>(file.data_start + t.offset));
  in.read(bytes.data(), static_cast<std::streamsize>(t.bytes));
  if (!in) return Status::io_error(file.path + ": cannot read tensor '" + t.name + "' (the file changed since it was read?)");
  return bytes;
}

}  // namespace trident::exporting
