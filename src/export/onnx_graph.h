// Building an ONNX graph through protobuf classes generated from ONNX's own onnx.proto: nodes
// with generated unique output names, initializers from host floats in the type the export
// asks for, and typed graph inputs and outputs with symbolic dimensions. Only export/onnx_*.cc
// (and their tests) include this header: the rest of trident never sees protobuf.
//
// Note [Two protobufs]
// Debian's libonnx-dev ships the generated headers (onnx/onnx-ml.pb.h) and libonnx_proto.so over
// libprotobuf.so. Linked into trident they crashed the executable as it loaded: libsentencepiece.so
// (the SentencePiece tokenizers) bundles protobuf-lite and exports its symbols, libprotobuf.so's
// start-up code bound to some of them, and the two versions' objects met. Linking the static
// libprotobuf-lite.a alone was not enough: lld bound ~95 of its symbols to libsentencepiece.so's
// copies instead of pulling them from the archive. So the build (src/CMakeLists.txt) runs protoc
// (protobuf-compiler) over the package's onnx.proto (LITE_RUNTIME), links libprotobuf-lite.a
// whole (every symbol defined in the executable, none taken from a shared library) and out of
// the dynamic symbol table (--exclude-libs), and compiles the generated code and export/onnx_*.cc
// with hidden visibility (their inline and template instances are not exported either): each
// library keeps its own protobuf, and `nm -D` of trident shows no protobuf symbol either way.

#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "onnx/onnx.pb.h"  // generated into the build (src/CMakeLists.txt, trident_onnx_proto)

namespace trident::exporting {

// A node attribute: an int, a float or a list of ints.
struct OnnxAttr {
  std::string name;
  std::variant<int64_t, float, std::vector<int64_t>> value;
};

// A dimension of a graph input or output: fixed, or a symbolic name ("batch_size").
using OnnxDim = std::variant<int64_t, std::string>;

class OnnxGraph {
 public:
  explicit OnnxGraph(onnx::GraphProto* graph) : g_(graph) {}

  // A node of `op` (the default domain) with one output; returns its name, `out` when given.
  std::string op(const std::string& op, const std::vector<std::string>& inputs, const std::vector<OnnxAttr>& attrs = {},
                 const std::string& out = "");
  // A node with `n` outputs.
  std::vector<std::string> ops(const std::string& op, const std::vector<std::string>& inputs, int n,
                               const std::vector<OnnxAttr>& attrs = {});

  // Initializers. `name` must be unique; the data is copied (fp16 rounded to nearest even).
  std::string floats(const std::string& name, const std::vector<int64_t>& dims, const float* data);
  std::string halves(const std::string& name, const std::vector<int64_t>& dims, const float* data);
  std::string int8s(const std::string& name, const std::vector<int64_t>& dims, const int8_t* data);
  std::string int64s(const std::string& name, const std::vector<int64_t>& dims, const std::vector<int64_t>& data);
  // Constants by value (named from the value, shared when asked again).
  std::string const_ints(const std::vector<int64_t>& v);  // 1-D int64
  std::string const_int(int64_t v);                       // int64 scalar
  std::string const_float(float v);                       // float scalar

  void input(const std::string& name, onnx::TensorProto_DataType type, const std::vector<OnnxDim>& dims);
  void output(const std::string& name, onnx::TensorProto_DataType type, const std::vector<OnnxDim>& dims);

  // Bytes of initializer data so far.
  uint64_t initializer_bytes() const { return initializer_bytes_; }

 private:
  onnx::TensorProto* initializer(const std::string& name, onnx::TensorProto_DataType type,
                                 const std::vector<int64_t>& dims);
  onnx::GraphProto* g_;
  int64_t next_ = 0;
  uint64_t initializer_bytes_ = 0;
  std::vector<std::string> constants_;
};

}  // namespace trident::exporting
