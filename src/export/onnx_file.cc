#include "export/onnx_file.h"

#include <charconv>
#include <filesystem>
#include <optional>
#include <tuple>
#include <unordered_set>

#include "checkpoint/atomic_file.h"
#include "checkpoint/env.h"
#include "export/onnx_graph.h"

namespace trident::exporting {

namespace {

// Bytes of one element of a tensor type trident writes; 0 for others.
int64_t element_bytes(int32_t type) {
  switch (type) {
    case onnx::TensorProto::FLOAT: return 4;
    case onnx::TensorProto::FLOAT16: return 2;
    case onnx::TensorProto::INT8: return 1;
    case onnx::TensorProto::INT64: return 8;
    default: return 0;
  }
}

// An external tensor's (location, offset, length); nullopt when one is missing or not a number.
std::optional<std::tuple<std::string, uint64_t, uint64_t>> external_extent(const onnx::TensorProto& t) {
  std::string location;
  std::optional<uint64_t> offset = 0, length;
  for (const auto& e : t.external_data()) {
    if (e.key() == "location") location = e.value();
    if (e.key() == "offset" || e.key() == "length") {
      uint64_t v = 0;
      const auto [end, ec] = std::from_chars(e.value().data(), e.value().data() + e.value().size(), v);
      if (ec != std::errc() || end != e.value().data() + e.value().size()) return std::nullopt;
      (e.key() == "offset" ? offset : length) = v;
    }
  }
  if (location.empty() || !length) return std::nullopt;
  return std::make_tuple(location, *offset, *length);
}

}  // namespace

StatusOr<OnnxWritten> write_onnx_file(const std::string& path, onnx::ModelProto& model, uint64_t inline_bytes) {
  OnnxWritten written;
  onnx::GraphProto* g = model.mutable_graph();
  uint64_t data = 0;
  for (const onnx::TensorProto& t : g->initializer()) data += t.raw_data().size();
  if (data > inline_bytes) {
    // External data: the large tensors' bytes, in graph order, in one file beside the model.
    const std::string name = std::filesystem::path(path).filename().string() + ".data";
    const std::string data_path = (std::filesystem::path(path).parent_path() / name).string();
    auto out = checkpoint::AtomicFileWriter::create(checkpoint::default_env(), data_path);
    if (!out.is_ok()) return out.status();
    for (onnx::TensorProto& t : *g->mutable_initializer()) {
      if (t.raw_data().size() < 1024) continue;  // small tensors (shapes, scales) stay inline
      const uint64_t offset = out.value().size(), length = t.raw_data().size();
      if (Status s = out.value().append(t.raw_data()); !s.is_ok()) return s;
      t.clear_raw_data();
      t.set_data_location(onnx::TensorProto::EXTERNAL);
      for (const auto& [key, value] : {std::pair<const char*, std::string>{"location", name},
                                       {"offset", std::to_string(offset)}, {"length", std::to_string(length)}}) {
        onnx::StringStringEntryProto* e = t.add_external_data();
        e->set_key(key);
        e->set_value(value);
      }
    }
    if (Status s = out.value().commit(); !s.is_ok()) return s;
    written.external_bytes = out.value().size();
  }
  const size_t size = model.ByteSizeLong();
  if (size > kOnnxMaxBytes)
    return Status::invalid("export --format onnx: the model's graph takes " + std::to_string(size) +
                           " bytes outside its external data; one ONNX protobuf holds at most 2 GB (2147483647 bytes)");
  std::string bytes;
  if (!model.SerializeToString(&bytes))
    return Status::error(ErrorKind::kInternal, "export: protobuf could not serialize the ONNX model for " + path);
  auto out = checkpoint::AtomicFileWriter::create(checkpoint::default_env(), path);
  if (!out.is_ok()) return out.status();
  if (Status s = out.value().append(bytes); !s.is_ok()) return s;
  if (Status s = out.value().commit(); !s.is_ok()) return s;
  written.bytes = bytes.size();
  return written;
}

StatusOr<OnnxFileSummary> read_onnx_file(const std::string& path) {
  auto bytes = checkpoint::read_file(checkpoint::default_env(), path);
  if (!bytes.is_ok()) return bytes.status();
  auto bad = [&](const std::string& what) { return Status::invalid("ONNX file " + path + ": " + what); };
  onnx::ModelProto model;
  if (bytes.value().size() > kOnnxMaxBytes || !model.ParseFromString(bytes.value()))
    return bad("does not parse as an ONNX ModelProto (" + std::to_string(bytes.value().size()) +
               " bytes): truncated, or not an ONNX file");
  OnnxFileSummary s;
  s.ir_version = model.ir_version();
  if (s.ir_version < 3) return bad("ir_version " + std::to_string(s.ir_version) + "; an ONNX model has 3 or later");
  for (const auto& o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") s.opset = o.version();
  if (s.opset == 0) return bad("imports no opset of the default domain");
  const onnx::GraphProto& g = model.graph();
  if (g.node_size() == 0) return bad("its graph has no nodes");
  std::unordered_set<std::string> defined;
  int64_t external_size = -1;  // the external data file's bytes, once looked up
  for (const auto& in : g.input()) {
    s.inputs.push_back(in.name());
    defined.insert(in.name());
  }
  for (const onnx::TensorProto& t : g.initializer()) {
    int64_t n = 1;
    for (int64_t d : t.dims()) n *= d;
    const int64_t eb = element_bytes(t.data_type());
    if (eb == 0) return bad("initializer '" + t.name() + "' has data type " + std::to_string(t.data_type()) +
                            ", not one trident writes");
    if (t.data_location() == onnx::TensorProto::EXTERNAL) {
      auto where = external_extent(t);
      if (!where) return bad("initializer '" + t.name() + "' is external data without a location, offset and length");
      const auto& [location, offset, length] = *where;
      if (location.empty() || location.find('/') != std::string::npos || location == "." || location == "..")
        return bad("initializer '" + t.name() + "' has external data at '" + location +
                   "'; trident writes a file name beside the model");
      if (!s.external_data.empty() && s.external_data != location)
        return bad("initializers name two external data files, '" + s.external_data + "' and '" + location + "'");
      s.external_data = location;
      const std::string data_path = (std::filesystem::path(path).parent_path() / location).string();
      if (external_size < 0) {
        auto size = checkpoint::default_env()->file_size(data_path);
        if (!size.is_ok()) return bad("its external data file " + data_path + " cannot be read: " + size.status().message());
        external_size = static_cast<int64_t>(size.value());
      }
      if (static_cast<int64_t>(length) != n * eb)
        return bad("initializer '" + t.name() + "' has " + std::to_string(length) + " bytes of external data; its shape needs " +
                   std::to_string(n * eb));
      if (offset + length > static_cast<uint64_t>(external_size))
        return bad("initializer '" + t.name() + "' ends at byte " + std::to_string(offset + length) + " of " + data_path +
                   ", which holds " + std::to_string(external_size) + " (truncated?)");
      s.initializer_bytes += length;
      ++s.external_tensors;
    } else {
      if (static_cast<int64_t>(t.raw_data().size()) != n * eb)
        return bad("initializer '" + t.name() + "' holds " + std::to_string(t.raw_data().size()) + " bytes; its shape needs " +
                   std::to_string(n * eb));
      s.initializer_bytes += t.raw_data().size();
    }
    if (!defined.insert(t.name()).second) return bad("the name '" + t.name() + "' is defined twice");
  }
  s.initializers = g.initializer_size();
  for (const onnx::NodeProto& node : g.node()) {
    if (!node.domain().empty() && node.domain() != "ai.onnx")
      return bad("node '" + node.name() + "' is of domain '" + node.domain() + "', not a standard ONNX operator");
    s.op_types.insert(node.op_type());
    for (const std::string& in : node.input())
      if (!in.empty() && !defined.count(in))
        return bad("node '" + node.name() + "' (" + node.op_type() + ") reads '" + in + "', which nothing before it defines");
    for (const std::string& out : node.output())
      if (!defined.insert(out).second) return bad("the name '" + out + "' is defined twice");
  }
  s.nodes = g.node_size();
  for (const auto& out : g.output()) {
    if (!defined.count(out.name())) return bad("graph output '" + out.name() + "' is produced by no node");
    s.outputs.push_back(out.name());
  }
  return s;
}

}  // namespace trident::exporting
