#include "checkpoint/safetensors.h"

#include <algorithm>
#include <bit>
#include <set>
#include <tuple>

#include "checkpoint/status_macros.h"
#include "checkpoint/strict_json.h"
#include "core/copy.h"
#include "core/factory.h"

namespace trident::checkpoint {

static_assert(std::endian::native == std::endian::little,
              "safetensors stores little-endian values; trident copies them as they are");

namespace {

// The Rust reference implementation's limit; a larger header is treated as corrupt.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr const char* kMetadataKey = "__metadata__";

struct DTypeInfo {
  const char* name;
  size_t size;
  std::optional<DType> dtype;
};

constexpr DTypeInfo kDTypes[] = {
    {"F32", 4, DType::kF32},  {"F64", 8, DType::kF64},      {"BF16", 2, DType::kBF16},
    {"F16", 2, DType::kF16},  {"I32", 4, DType::kI32},      {"I64", 8, DType::kI64},
    {"U16", 2, DType::kU16},  {"BOOL", 1, std::nullopt},    {"U8", 1, std::nullopt},
    {"I8", 1, std::nullopt},  {"I16", 2, std::nullopt},     {"U32", 4, std::nullopt},
    {"U64", 8, std::nullopt}, {"F8_E4M3", 1, std::nullopt}, {"F8_E5M2", 1, std::nullopt},
};

const DTypeInfo* find_dtype(std::string_view name) {
  for (const DTypeInfo& d : kDTypes)
    if (name == d.name) return &d;
  return nullptr;
}

std::string known_dtype_list() {
  std::string s;
  for (const DTypeInfo& d : kDTypes) s += std::string(s.empty() ? "" : ", ") + d.name;
  return s;
}

std::string offsets_str(const SafetensorsEntry& e) {
  return std::string("[") + std::to_string(e.begin) + ", " + std::to_string(e.end) + "]";
}

// Note [Tensor order in a safetensors file]
// Why not exactly the caller's order? The data section starts 8-byte aligned (the header is
// padded), and the reference writer orders tensors by decreasing element size so that every
// tensor starts at a multiple of its own element size: readers that map the file and view the
// bytes in place (safetensors' safe_open, numpy.frombuffer) then never see a misaligned
// tensor. trident does the same with a *stable* sort, so tensors of equal element size keep
// the caller's order (the reference breaks ties by name). The header lists tensors in data
// order, with "__metadata__" first when there is any, exactly as the reference writes it.
std::vector<size_t> file_order(std::span<const TensorSpec> specs) {
  std::vector<size_t> order(specs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return element_size(specs[a].dtype) > element_size(specs[b].dtype);
  });
  return order;
}

std::vector<TensorSpec> specs_of(std::span<const NamedTensor> tensors) {
  std::vector<TensorSpec> specs;
  // Tensors on a device are fine: their bytes are copied to the host one tensor at a time.
  for (const NamedTensor& nt : tensors) specs.push_back({nt.name, nt.tensor.dtype(), nt.tensor.shape()});
  return specs;
}

void check_writable(std::span<const TensorSpec> specs) {
  std::set<std::string_view> seen;
  for (const TensorSpec& spec : specs) {
    TRI_CHECK(!spec.name.empty(), "safetensors: a tensor name is empty");
    TRI_CHECK(spec.name != kMetadataKey, "safetensors: '", kMetadataKey,
              "' is reserved for metadata and cannot name a tensor");
    TRI_CHECK(seen.insert(spec.name).second, "safetensors: the tensor name '", spec.name,
              "' is given twice");
  }
}

uint64_t read_le64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Parses a JSON array of non-negative integers.
std::optional<std::vector<uint64_t>> unsigned_array(const nlohmann::json& j) {
  if (!j.is_array()) return std::nullopt;
  std::vector<uint64_t> out;
  for (const auto& v : j) {
    if (!v.is_number_unsigned()) return std::nullopt;
    out.push_back(v.get<uint64_t>());
  }
  return out;
}

// One tensor's description: dtype, shape and data_offsets, consistent with each other.
StatusOr<SafetensorsEntry> parse_entry(const std::string& name, const nlohmann::json& value,
                                       const std::string& where) {
  const std::string tensor = where + ": tensor '" + name + "'";
  auto bad = [&](const std::string& problem) { return Status::invalid(tensor + ": " + problem); };
  if (!value.is_object()) return bad("the description is not a JSON object");
  // Unknown extra fields are ignored, as the reference reader does.
  const auto dtype = value.find("dtype");
  const auto shape = value.find("shape");
  const auto offsets = value.find("data_offsets");
  if (dtype == value.end() || shape == value.end() || offsets == value.end()) {
    return bad("needs \"dtype\", \"shape\" and \"data_offsets\"; it has " + value.dump());
  }
  SafetensorsEntry e;
  e.name = name;
  if (!dtype->is_string()) return bad("\"dtype\" is not a string");
  e.dtype_name = dtype->get<std::string>();
  const DTypeInfo* info = find_dtype(e.dtype_name);
  if (info == nullptr) {
    return bad("unknown dtype '" + e.dtype_name + "' (the format defines " + known_dtype_list() +
               ")");
  }
  e.dtype = info->dtype;
  const auto dims = unsigned_array(*shape);
  if (!dims) return bad("\"shape\" is not a list of non-negative integers");
  if (dims->size() > static_cast<size_t>(Shape::kMaxDims)) {
    return bad(std::to_string(dims->size()) + " dims; trident tensors have at most " +
               std::to_string(Shape::kMaxDims));
  }
  // Element count and byte size, refusing anything that overflows (a corrupt header must not
  // turn into a huge allocation or a wrapped-around size).
  uint64_t numel = 1;
  for (uint64_t d : *dims) {
    if (d > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(numel, d, &numel) ||
        numel > static_cast<uint64_t>(INT64_MAX)) {
      return bad("shape " + shape->dump() + " has too many elements");
    }
  }
  uint64_t nbytes = 0;
  if (__builtin_mul_overflow(numel, info->size, &nbytes)) {
    return bad("shape " + shape->dump() + " has too many bytes");
  }
  std::vector<int64_t> sdims(dims->begin(), dims->end());
  e.shape = Shape(sdims);
  const auto range = unsigned_array(*offsets);
  if (!range || range->size() != 2) {
    return bad("\"data_offsets\" is not a pair of non-negative integers");
  }
  e.begin = (*range)[0];
  e.end = (*range)[1];
  if (e.end < e.begin) return bad("data_offsets " + offsets_str(e) + " end before they begin");
  if (e.end - e.begin != nbytes) {
    return bad("dtype " + e.dtype_name + " and shape " + shape->dump() + " need " +
               std::to_string(nbytes) + " bytes, but data_offsets " + offsets_str(e) + " hold " +
               std::to_string(e.end - e.begin));
  }
  return e;
}

}  // namespace

const char* safetensors_dtype_name(DType dtype) {
  for (const DTypeInfo& d : kDTypes)
    if (d.dtype == dtype) return d.name;
  TRI_ASSERT(false, "no safetensors name for dtype ", dtype_name(dtype));
}

std::optional<DType> dtype_from_safetensors(std::string_view name) {
  const DTypeInfo* d = find_dtype(name);
  return d ? d->dtype : std::nullopt;
}

std::optional<size_t> safetensors_element_size(std::string_view name) {
  const DTypeInfo* d = find_dtype(name);
  return d ? std::optional<size_t>(d->size) : std::nullopt;
}

// ---- writing ----

std::string safetensors_header_for(std::span<const TensorSpec> specs, const StringMap& metadata) {
  check_writable(specs);
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  uint64_t offset = 0;
  for (size_t i : file_order(specs)) {
    const uint64_t nbytes = static_cast<uint64_t>(specs[i].shape.product()) * element_size(specs[i].dtype);
    nlohmann::ordered_json entry;
    entry["dtype"] = safetensors_dtype_name(specs[i].dtype);
    entry["shape"] = specs[i].shape.vec();
    entry["data_offsets"] = {offset, offset + nbytes};
    offset += nbytes;
    header[specs[i].name] = std::move(entry);
  }
  std::string json = dump_json(header, "safetensors header");
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((json.size() >> (8 * i)) & 0xFF);
  return out + json;
}

std::string safetensors_header(std::span<const NamedTensor> tensors, const StringMap& metadata) {
  return safetensors_header_for(specs_of(tensors), metadata);
}

Status write_safetensors_streamed(AtomicFileWriter& out, std::span<const TensorSpec> specs,
                                  const std::function<StatusOr<Tensor>(size_t)>& load, const StringMap& metadata) {
  CKPT_RETURN_IF_ERROR(out.append(safetensors_header_for(specs, metadata)));
  for (size_t i : file_order(specs)) {
    CKPT_ASSIGN_OR_RETURN(Tensor t, load(i));
    TRI_CHECK(t.dtype() == specs[i].dtype && t.shape() == specs[i].shape, "safetensors: tensor '", specs[i].name,
              "' was declared ", dtype_name(specs[i].dtype), " ", specs[i].shape, " but is ", dtype_name(t.dtype()), " ",
              t.shape());
    const Tensor contiguous = core::to_device(core::contiguous(t), Device::cpu());  // files hold host bytes
    CKPT_RETURN_IF_ERROR(out.append(std::string_view(static_cast<const char*>(contiguous.raw_data()), contiguous.nbytes())));
  }
  return Status::ok();
}

Status write_safetensors(AtomicFileWriter& out, std::span<const NamedTensor> tensors,
                         const StringMap& metadata) {
  const std::vector<TensorSpec> specs = specs_of(tensors);
  return write_safetensors_streamed(
      out, specs, [&](size_t i) -> StatusOr<Tensor> { return tensors[i].tensor; }, metadata);
}

Status save_safetensors(Env* env, const std::string& path, std::span<const NamedTensor> tensors,
                        const StringMap& metadata) {
  CKPT_ASSIGN_OR_RETURN(AtomicFileWriter out, AtomicFileWriter::create(env, path));
  CKPT_RETURN_IF_ERROR(write_safetensors(out, tensors, metadata));
  return out.commit();
}

// ---- reading ----

StatusOr<SafetensorsReader> SafetensorsReader::open(Env* env, const std::string& path) {
  const std::string where = "safetensors file '" + path + "'";
  auto bad = [&](const std::string& problem) { return Status::invalid(where + ": " + problem); };

  SafetensorsReader r;
  CKPT_ASSIGN_OR_RETURN(r.file_, env->new_random_access_file(path));
  const uint64_t file_size = r.file_->size();
  if (file_size < 8) {
    return bad("the file is " + std::to_string(file_size) +
               " bytes long, too short for the 8-byte header length (truncated?)");
  }
  unsigned char len_bytes[8];
  CKPT_RETURN_IF_ERROR(r.file_->read(0, 8, len_bytes));
  const uint64_t header_len = read_le64(len_bytes);
  if (header_len > file_size - 8) {
    return bad("the header length " + std::to_string(header_len) + " runs past the end of the " +
               std::to_string(file_size) + "-byte file (truncated, or not a safetensors file)");
  }
  if (header_len > kMaxHeaderBytes) {
    return bad("the header length " + std::to_string(header_len) + " exceeds the format's " +
               std::to_string(kMaxHeaderBytes) + "-byte limit");
  }
  std::string text(header_len, '\0');
  CKPT_RETURN_IF_ERROR(r.file_->read(8, text.size(), text.data()));
  if (text.empty() || text[0] != '{') return bad("the header does not start with '{'");
  CKPT_ASSIGN_OR_RETURN(nlohmann::json header, parse_json_strict(text, where + ": the header"));
  if (!header.is_object()) return bad("the header is not a JSON object");

  for (const auto& [name, value] : header.items()) {
    if (name == kMetadataKey) {
      if (!value.is_object()) return bad("'__metadata__' is not an object of strings");
      for (const auto& [key, v] : value.items()) {
        if (!v.is_string()) return bad("'__metadata__' value of '" + key + "' is not a string");
        r.metadata_[key] = v.get<std::string>();
      }
      continue;
    }
    CKPT_ASSIGN_OR_RETURN(SafetensorsEntry e, parse_entry(name, value, where));
    r.entries_.push_back(std::move(e));
  }

  // Offsets must tile the data section exactly: sorted by (begin, end), each tensor starts
  // where the previous one ended, the first at 0, the last at the end of the file.
  std::sort(r.entries_.begin(), r.entries_.end(), [](const auto& a, const auto& b) {
    return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
  });
  uint64_t cursor = 0;
  for (size_t i = 0; i < r.entries_.size(); ++i) {
    const SafetensorsEntry& e = r.entries_[i];
    if (e.begin < cursor) {
      return bad("tensors '" + r.entries_[i - 1].name + "' " + offsets_str(r.entries_[i - 1]) +
                 " and '" + e.name + "' " + offsets_str(e) + " overlap");
    }
    if (e.begin > cursor) {
      return bad(std::to_string(e.begin - cursor) + " unused bytes before tensor '" + e.name +
                 "' " + offsets_str(e) + " (data must be packed without gaps)");
    }
    cursor = e.end;
  }
  r.data_start_ = 8 + header_len;
  const uint64_t data_size = file_size - r.data_start_;
  if (cursor > data_size) {
    return bad("truncated: the tensors need " + std::to_string(cursor) +
               " data bytes after the header, the file has " + std::to_string(data_size));
  }
  if (cursor < data_size) {
    return bad(std::to_string(data_size - cursor) +
               " bytes after the last tensor's data (the header does not describe them)");
  }
  for (size_t i = 0; i < r.entries_.size(); ++i) r.index_.emplace(r.entries_[i].name, i);
  return r;
}

const SafetensorsEntry* SafetensorsReader::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

StatusOr<const SafetensorsEntry*> SafetensorsReader::loadable(std::string_view name) const {
  const SafetensorsEntry* e = find(name);
  if (e == nullptr) {
    std::string names;
    for (size_t i = 0; i < entries_.size() && i < 8; ++i)
      names += (i ? ", '" : "'") + entries_[i].name + "'";
    if (entries_.size() > 8) names += ", ... (" + std::to_string(entries_.size()) + " in all)";
    return Status::invalid(
        "safetensors file '" + path() + "' has no tensor '" + std::string(name) + "'" +
        (entries_.empty() ? std::string(" (it has none)") : "; it has " + names));
  }
  if (!e->dtype) {
    return Status::error(ErrorKind::kNotImplemented,
                         "safetensors file '" + path() + "': tensor '" + e->name + "' has dtype " +
                             e->dtype_name +
                             ", which trident does not support (it loads F32, "
                             "F64, BF16, F16, I32, I64, U16)");
  }
  return e;
}

StatusOr<Tensor> SafetensorsReader::load(std::string_view name) const {
  CKPT_ASSIGN_OR_RETURN(const SafetensorsEntry* e, loadable(name));
  Tensor t = empty(e->shape, *e->dtype);
  if (t.nbytes() > 0)
    CKPT_RETURN_IF_ERROR(file_->read(data_start_ + e->begin, t.nbytes(), t.raw_data()));
  return t;
}

StatusOr<Tensor> SafetensorsReader::load_floating(std::string_view name) const {
  const SafetensorsEntry* e = find(name);
  // (F8_E4M3 and F8_E5M2 are floating too, and load() says trident lacks them.)
  if (e != nullptr && !(e->dtype ? is_floating(*e->dtype) : e->dtype_name.starts_with("F8_")))
    return Status::invalid("safetensors file '" + path() + "': tensor '" + e->name + "' has dtype " + e->dtype_name +
                           ", which is not floating-point: a model's parameter loads from F32, F64, BF16 or F16");
  return load(name);
}

StatusOr<Tensor> SafetensorsReader::load_elements(std::string_view name, int64_t first,
                                                  int64_t count) const {
  CKPT_ASSIGN_OR_RETURN(const SafetensorsEntry* e, loadable(name));
  TRI_CHECK_INDEX(first >= 0 && count >= 0 && first <= e->numel() - count,
                  "load_elements: elements [", first, ", ", first, " + ", count,
                  ") are outside tensor '", e->name, "' of ", e->numel(), " elements in '", path(),
                  "'");
  Tensor t = empty(Shape{count}, *e->dtype);
  const uint64_t at =
      data_start_ + e->begin + static_cast<uint64_t>(first) * element_size(*e->dtype);
  if (t.nbytes() > 0) CKPT_RETURN_IF_ERROR(file_->read(at, t.nbytes(), t.raw_data()));
  return t;
}

StatusOr<std::vector<NamedTensor>> load_safetensors(Env* env, const std::string& path) {
  CKPT_ASSIGN_OR_RETURN(SafetensorsReader reader, SafetensorsReader::open(env, path));
  std::vector<NamedTensor> out;
  for (const SafetensorsEntry& e : reader.entries()) {
    CKPT_ASSIGN_OR_RETURN(Tensor t, reader.load(e.name));
    out.push_back({e.name, std::move(t)});
  }
  return out;
}

}  // namespace trident::checkpoint
