#include "checkpoint/manifest.h"

#include <algorithm>
#include <set>

#include "core/crc32c.h"
#include "checkpoint/status_macros.h"
#include "checkpoint/strict_json.h"

namespace trident::checkpoint {
namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

std::string dims_str(std::span<const int64_t> dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

std::string shard_str(const TensorShard& s) {
  std::string where = "shard '" + s.key + "' of file '" + s.file + "'";
  if (s.kind == TensorShard::Kind::kFlat) {
    return where + " (flat_range [" + std::to_string(s.flat_begin) + ", " +
           std::to_string(s.flat_end) + "])";
  }
  return where + " (offsets " + dims_str(s.offsets) + ", shape " + dims_str(s.shape.span()) + ")";
}

// Whether two boxes of the same rank share an element.
bool boxes_intersect(const TensorShard& a, const TensorShard& b) {
  for (size_t d = 0; d < a.offsets.size(); ++d) {
    const int64_t lo = std::max(a.offsets[d], b.offsets[d]);
    const int64_t hi = std::min(a.offsets[d] + a.shape[d], b.offsets[d] + b.shape[d]);
    if (lo >= hi) return false;
  }
  return true;
}

Status validate_tensor(const Manifest& m, const std::string& name, const ManifestTensor& t,
                       const std::string& where) {
  const std::string tensor = where + ": tensor '" + name + "' " + t.shape.str();
  auto bad = [&](const std::string& problem) { return Status::invalid(tensor + ": " + problem); };
  for (int64_t d : t.shape)
    if (d < 0) return bad("has a negative dimension");
  if (t.shards.empty()) return bad("has no shards");
  const int64_t numel = t.shape.product();
  const TensorShard::Kind kind = t.shards[0].kind;
  for (const TensorShard& s : t.shards) {
    if (m.find_file(s.file) == nullptr)
      return bad(shard_str(s) + " names a file not in the manifest");
    if (s.kind != kind) return bad("mixes box and flat shards");
    if (s.kind == TensorShard::Kind::kFlat) {
      if (s.flat_begin < 0 || s.flat_end < s.flat_begin || s.flat_end > numel) {
        return bad(shard_str(s) + " is not a range inside [0, " + std::to_string(numel) + "]");
      }
      continue;
    }
    if (static_cast<int>(s.offsets.size()) != t.shape.size() || s.shape.size() != t.shape.size()) {
      return bad(shard_str(s) + " does not have one offset and one extent per dim");
    }
    for (int d = 0; d < t.shape.size(); ++d) {
      if (s.offsets[d] < 0 || s.shape[d] < 0 || s.offsets[d] > t.shape[d] - s.shape[d]) {
        return bad(shard_str(s) + " lies outside the tensor in dim " + std::to_string(d));
      }
    }
  }
  // Exactly-once coverage. Flat: sorted ranges must chain from 0 to numel. Box: the volumes
  // must add up to numel with no two boxes intersecting (quadratic, but a tensor has as many
  // box shards as a tensor-parallel degree, not thousands).
  std::vector<const TensorShard*> shards;
  for (const TensorShard& s : t.shards) shards.push_back(&s);
  if (kind == TensorShard::Kind::kFlat) {
    std::sort(shards.begin(), shards.end(), [](const TensorShard* a, const TensorShard* b) {
      return std::tie(a->flat_begin, a->flat_end) < std::tie(b->flat_begin, b->flat_end);
    });
    int64_t cursor = 0;
    for (const TensorShard* s : shards) {
      if (s->flat_begin != cursor) {
        return bad(s->flat_begin < cursor
                       ? shard_str(*s) + " overlaps another shard"
                       : "elements [" + std::to_string(cursor) + ", " +
                             std::to_string(s->flat_begin) + ") are in no shard");
      }
      cursor = s->flat_end;
    }
    if (cursor != numel) {
      return bad("elements [" + std::to_string(cursor) + ", " + std::to_string(numel) +
                 ") are in no shard");
    }
    return Status::ok();
  }
  int64_t volume = 0;
  for (size_t i = 0; i < shards.size(); ++i) {
    volume += shards[i]->shape.product();
    for (size_t j = 0; j < i; ++j) {
      if (shards[i]->shape.product() > 0 && shards[j]->shape.product() > 0 &&
          boxes_intersect(*shards[i], *shards[j])) {
        return bad(shard_str(*shards[i]) + " overlaps " + shard_str(*shards[j]));
      }
    }
  }
  if (volume != numel) {
    return bad("its shards hold " + std::to_string(volume) + " elements, the tensor has " +
               std::to_string(numel) + " (some elements are in no shard)");
  }
  return Status::ok();
}

// ---- JSON field access with messages ----

class Fields {
 public:
  Fields(const json& object, std::string where) : object_(object), where_(std::move(where)) {}

  Status require_object() const {
    return object_.is_object() ? Status::ok() : Status::invalid(where_ + " is not a JSON object");
  }
  // Unknown keys are errors: see the schema in manifest.h.
  Status only(std::initializer_list<std::string_view> allowed) const {
    for (const auto& [key, value] : object_.items()) {
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        return Status::invalid(where_ + " has an unknown key '" + key + "'");
      }
    }
    return Status::ok();
  }
  StatusOr<const json*> get(const char* key) const {
    auto it = object_.find(key);
    if (it == object_.end()) return Status::invalid(where_ + " lacks \"" + key + "\"");
    return &*it;
  }
  StatusOr<std::string> string(const char* key) const {
    CKPT_ASSIGN_OR_RETURN(const json* v, get(key));
    if (!v->is_string()) return wrong(key, "a string");
    return v->get<std::string>();
  }
  StatusOr<uint64_t> unsigned_int(const char* key) const {
    CKPT_ASSIGN_OR_RETURN(const json* v, get(key));
    if (!v->is_number_unsigned()) return wrong(key, "a non-negative integer");
    return v->get<uint64_t>();
  }
  StatusOr<std::vector<int64_t>> dims(const char* key) const {
    CKPT_ASSIGN_OR_RETURN(const json* v, get(key));
    std::vector<int64_t> out;
    if (!v->is_array()) return wrong(key, "a list of non-negative integers");
    for (const json& d : *v) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
        return wrong(key, "a list of non-negative integers");
      }
      out.push_back(d.get<int64_t>());
    }
    return out;
  }
  StatusOr<Shape> shape(const char* key) const {
    CKPT_ASSIGN_OR_RETURN(std::vector<int64_t> d, dims(key));
    if (d.size() > static_cast<size_t>(Shape::kMaxDims)) return wrong(key, "at most 8 dims");
    return Shape(d);
  }
  const std::string& where() const { return where_; }

 private:
  Status wrong(const char* key, const char* expected) const {
    return Status::invalid(where_ + ": \"" + key + "\" is not " + expected + " (it is " +
                           object_.at(key).dump() + ")");
  }
  const json& object_;
  std::string where_;
};

StatusOr<TensorShard> parse_shard(const json& j, const std::string& where) {
  Fields f(j, where);
  CKPT_RETURN_IF_ERROR(f.require_object());
  TensorShard s;
  CKPT_ASSIGN_OR_RETURN(s.file, f.string("file"));
  CKPT_ASSIGN_OR_RETURN(s.key, f.string("key"));
  if (j.contains("flat_range")) {
    CKPT_RETURN_IF_ERROR(f.only({"file", "key", "flat_range"}));
    CKPT_ASSIGN_OR_RETURN(std::vector<int64_t> range, f.dims("flat_range"));
    if (range.size() != 2) return Status::invalid(where + ": \"flat_range\" is not [begin, end]");
    s.kind = TensorShard::Kind::kFlat;
    s.flat_begin = range[0];
    s.flat_end = range[1];
    return s;
  }
  CKPT_RETURN_IF_ERROR(f.only({"file", "key", "offsets", "shape"}));
  CKPT_ASSIGN_OR_RETURN(s.offsets, f.dims("offsets"));
  CKPT_ASSIGN_OR_RETURN(s.shape, f.shape("shape"));
  return s;
}

StatusOr<ManifestTensor> parse_tensor(const json& j, const std::string& where) {
  Fields f(j, where);
  CKPT_RETURN_IF_ERROR(f.require_object());
  CKPT_RETURN_IF_ERROR(f.only({"dtype", "shape", "shards"}));
  ManifestTensor t;
  CKPT_ASSIGN_OR_RETURN(std::string dtype, f.string("dtype"));
  auto d = dtype_from_safetensors(dtype);
  if (!d) return Status::invalid(where + ": dtype '" + dtype + "' is not one trident has");
  t.dtype = *d;
  CKPT_ASSIGN_OR_RETURN(t.shape, f.shape("shape"));
  CKPT_ASSIGN_OR_RETURN(const json* shards, f.get("shards"));
  if (!shards->is_array()) return Status::invalid(where + ": \"shards\" is not a list");
  for (size_t i = 0; i < shards->size(); ++i) {
    CKPT_ASSIGN_OR_RETURN(TensorShard s,
                          parse_shard((*shards)[i], where + " shard " + std::to_string(i)));
    t.shards.push_back(std::move(s));
  }
  return t;
}

}  // namespace

TensorShard TensorShard::whole(std::string file, std::string key, const Shape& shape) {
  return box(std::move(file), std::move(key), std::vector<int64_t>(shape.size(), 0), shape);
}

TensorShard TensorShard::box(std::string file, std::string key, std::vector<int64_t> offsets,
                             const Shape& shape) {
  TensorShard s;
  s.file = std::move(file);
  s.key = std::move(key);
  s.kind = Kind::kBox;
  s.offsets = std::move(offsets);
  s.shape = shape;
  return s;
}

TensorShard TensorShard::flat(std::string file, std::string key, int64_t begin, int64_t end) {
  TensorShard s;
  s.file = std::move(file);
  s.key = std::move(key);
  s.kind = Kind::kFlat;
  s.flat_begin = begin;
  s.flat_end = end;
  return s;
}

bool TensorShard::covers_whole(const Shape& full) const {
  if (kind == Kind::kFlat) return flat_begin == 0 && flat_end == full.product();
  return shape == full &&
         std::all_of(offsets.begin(), offsets.end(), [](int64_t o) { return o == 0; });
}

const ManifestFile* Manifest::find_file(std::string_view name) const {
  for (const ManifestFile& f : files)
    if (f.name == name) return &f;
  return nullptr;
}

bool is_valid_checkpoint_file_name(std::string_view name) {
  return !name.empty() && name.size() <= 255 && name.find('/') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos && name[0] != '.' && name != "manifest.json" &&
         name != "DONE";
}

Status validate_manifest(const Manifest& m, const std::string& where) {
  std::set<std::string_view> names;
  for (const ManifestFile& f : m.files) {
    if (!is_valid_checkpoint_file_name(f.name)) {
      return Status::invalid(where + ": '" + f.name +
                             "' is not a valid checkpoint file name (no '/', no leading '.', not "
                             "manifest.json or DONE)");
    }
    if (!names.insert(f.name).second) {
      return Status::invalid(where + ": file '" + f.name + "' is listed twice");
    }
  }
  for (const auto& [name, tensor] : m.tensors)
    CKPT_RETURN_IF_ERROR(validate_tensor(m, name, tensor, where));
  return Status::ok();
}

std::string manifest_to_json(const Manifest& m) {
  ordered_json j;
  j["format"] = kManifestFormat;
  j["version"] = kManifestVersion;
  j["name"] = m.name;
  j["metadata"] = ordered_json::object();
  for (const auto& [k, v] : m.metadata) j["metadata"][k] = v;
  j["files"] = ordered_json::array();
  for (const ManifestFile& f : m.files)
    j["files"].push_back({{"name", f.name}, {"size", f.size}, {"crc32c", core::crc32c_to_hex(f.crc32c)}});
  j["tensors"] = ordered_json::object();
  for (const auto& [name, t] : m.tensors) {
    ordered_json shards = ordered_json::array();
    for (const TensorShard& s : t.shards) {
      ordered_json js{{"file", s.file}, {"key", s.key}};
      if (s.kind == TensorShard::Kind::kFlat) {
        js["flat_range"] = {s.flat_begin, s.flat_end};
      } else {
        js["offsets"] = s.offsets;
        js["shape"] = s.shape.vec();
      }
      shards.push_back(std::move(js));
    }
    j["tensors"][name] = {{"dtype", safetensors_dtype_name(t.dtype)},
                          {"shape", t.shape.vec()},
                          {"shards", std::move(shards)}};
  }
  try {
    return j.dump(1) + "\n";
  } catch (const nlohmann::json::exception& e) {
    TRI_THROW(ErrorKind::kValue, "checkpoint manifest: cannot be written as JSON: ", e.what());
  }
}

StatusOr<Manifest> parse_manifest(std::string_view text, const std::string& where) {
  CKPT_ASSIGN_OR_RETURN(json j, parse_json_strict(text, where));
  Fields top(j, where);
  CKPT_RETURN_IF_ERROR(top.require_object());
  CKPT_RETURN_IF_ERROR(top.only({"format", "version", "name", "metadata", "files", "tensors"}));
  CKPT_ASSIGN_OR_RETURN(std::string format, top.string("format"));
  if (format != kManifestFormat) {
    return Status::invalid(where + ": \"format\" is '" + format + "', expected '" +
                           kManifestFormat + "'");
  }
  CKPT_ASSIGN_OR_RETURN(uint64_t version, top.unsigned_int("version"));
  if (version != static_cast<uint64_t>(kManifestVersion)) {
    return Status::invalid(where + ": format version " + std::to_string(version) +
                           " (this build of trident reads version " +
                           std::to_string(kManifestVersion) + "; a newer trident wrote it?)");
  }
  Manifest m;
  CKPT_ASSIGN_OR_RETURN(m.name, top.string("name"));

  CKPT_ASSIGN_OR_RETURN(const json* metadata, top.get("metadata"));
  if (!metadata->is_object()) return Status::invalid(where + ": \"metadata\" is not an object");
  for (const auto& [k, v] : metadata->items()) {
    if (!v.is_string()) return Status::invalid(where + ": metadata '" + k + "' is not a string");
    m.metadata[k] = v.get<std::string>();
  }

  CKPT_ASSIGN_OR_RETURN(const json* files, top.get("files"));
  if (!files->is_array()) return Status::invalid(where + ": \"files\" is not a list");
  for (size_t i = 0; i < files->size(); ++i) {
    Fields f((*files)[i], where + " file " + std::to_string(i));
    CKPT_RETURN_IF_ERROR(f.require_object());
    CKPT_RETURN_IF_ERROR(f.only({"name", "size", "crc32c"}));
    ManifestFile file;
    CKPT_ASSIGN_OR_RETURN(file.name, f.string("name"));
    CKPT_ASSIGN_OR_RETURN(file.size, f.unsigned_int("size"));
    CKPT_ASSIGN_OR_RETURN(std::string crc, f.string("crc32c"));
    auto parsed = core::crc32c_from_hex(crc);
    if (!parsed) {
      return Status::invalid(f.where() + ": crc32c '" + crc + "' is not 8 lowercase hex digits");
    }
    file.crc32c = *parsed;
    m.files.push_back(std::move(file));
  }

  CKPT_ASSIGN_OR_RETURN(const json* tensors, top.get("tensors"));
  if (!tensors->is_object()) return Status::invalid(where + ": \"tensors\" is not an object");
  for (const auto& [name, value] : tensors->items()) {
    CKPT_ASSIGN_OR_RETURN(ManifestTensor t, parse_tensor(value, where + " tensor '" + name + "'"));
    m.tensors.emplace(name, std::move(t));
  }
  CKPT_RETURN_IF_ERROR(validate_manifest(m, where));
  return m;
}

}  // namespace trident::checkpoint
