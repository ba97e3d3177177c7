#include "export/onnx_graph.h"

#include <algorithm>
#include <cstring>

#include "core/half.h"

namespace trident::exporting {

namespace {

void set_attr(onnx::NodeProto* node, const OnnxAttr& a) {
  onnx::AttributeProto* p = node->add_attribute();
  p->set_name(a.name);
  if (const auto* i = std::get_if<int64_t>(&a.value)) {
    p->set_type(onnx::AttributeProto::INT);
    p->set_i(*i);
  } else if (const auto* f = std::get_if<float>(&a.value)) {
    p->set_type(onnx::AttributeProto::FLOAT);
    p->set_f(*f);
  } else {
    p->set_type(onnx::AttributeProto::INTS);
    for (int64_t v : std::get<std::vector<int64_t>>(a.value)) p->add_ints(v);
  }
}

void set_type(onnx::ValueInfoProto* v, const std::string& name, onnx::TensorProto_DataType type,
              const std::vector<OnnxDim>& dims) {
  v->set_name(name);
  onnx::TypeProto_Tensor* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(type);
  onnx::TensorShapeProto* shape = t->mutable_shape();
  for (const OnnxDim& d : dims) {
    onnx::TensorShapeProto_Dimension* dim = shape->add_dim();
    if (const auto* n = std::get_if<int64_t>(&d)) dim->set_dim_value(*n);
    else dim->set_dim_param(std::get<std::string>(d));
  }
}

int64_t count(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

}  // namespace

std::vector<std::string> OnnxGraph::ops(const std::string& op, const std::vector<std::string>& inputs, int n,
                                        const std::vector<OnnxAttr>& attrs) {
  onnx::NodeProto* node = g_->add_node();
  const std::string id = std::to_string(next_++);
  node->set_op_type(op);
  node->set_name(op + "_" + id);
  for (const std::string& in : inputs) node->add_input(in);
  std::vector<std::string> outs;
  for (int i = 0; i < n; ++i) {
    outs.push_back("/" + op + "_" + id + "/output_" + std::to_string(i));
    node->add_output(outs.back());
  }
  for (const OnnxAttr& a : attrs) set_attr(node, a);
  return outs;
}

std::string OnnxGraph::op(const std::string& op, const std::vector<std::string>& inputs,
                          const std::vector<OnnxAttr>& attrs, const std::string& out) {
  std::string name = ops(op, inputs, 1, attrs)[0];
  if (!out.empty()) {
    g_->mutable_node(g_->node_size() - 1)->set_output(0, out);
    name = out;
  }
  return name;
}

onnx::TensorProto* OnnxGraph::initializer(const std::string& name, onnx::TensorProto_DataType type,
                                          const std::vector<int64_t>& dims) {
  onnx::TensorProto* t = g_->add_initializer();
  t->set_name(name);
  t->set_data_type(type);
  for (int64_t d : dims) t->add_dims(d);
  return t;
}

std::string OnnxGraph::floats(const std::string& name, const std::vector<int64_t>& dims, const float* data) {
  const size_t bytes = static_cast<size_t>(count(dims)) * sizeof(float);
  initializer(name, onnx::TensorProto::FLOAT, dims)->set_raw_data(data, bytes);  // raw_data: little-endian
  initializer_bytes_ += bytes;
  return name;
}

std::string OnnxGraph::halves(const std::string& name, const std::vector<int64_t>& dims, const float* data) {
  const int64_t n = count(dims);
  std::string raw(static_cast<size_t>(n) * 2, '\0');
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = f16::round_from_float(data[i]);
    std::memcpy(&raw[static_cast<size_t>(i) * 2], &h, 2);
  }
  initializer_bytes_ += raw.size();
  initializer(name, onnx::TensorProto::FLOAT16, dims)->set_raw_data(std::move(raw));
  return name;
}

std::string OnnxGraph::int8s(const std::string& name, const std::vector<int64_t>& dims, const int8_t* data) {
  const size_t bytes = static_cast<size_t>(count(dims));
  initializer(name, onnx::TensorProto::INT8, dims)->set_raw_data(data, bytes);
  initializer_bytes_ += bytes;
  return name;
}

std::string OnnxGraph::int64s(const std::string& name, const std::vector<int64_t>& dims,
                              const std::vector<int64_t>& data) {
  initializer(name, onnx::TensorProto::INT64, dims)->set_raw_data(data.data(), data.size() * sizeof(int64_t));
  initializer_bytes_ += data.size() * sizeof(int64_t);
  return name;
}

std::string OnnxGraph::const_ints(const std::vector<int64_t>& v) {
  std::string name = "const_ints";
  for (int64_t x : v) {  // appended in two steps: "_" + to_string trips GCC 12's -Wstringop-overflow
    name += '_';
    name += std::to_string(x);
  }
  if (std::find(constants_.begin(), constants_.end(), name) != constants_.end()) return name;
  constants_.push_back(name);
  return int64s(name, {static_cast<int64_t>(v.size())}, v);
}

std::string OnnxGraph::const_int(int64_t v) {
  const std::string name = "const_int_" + std::to_string(v);
  if (std::find(constants_.begin(), constants_.end(), name) != constants_.end()) return name;
  constants_.push_back(name);
  return int64s(name, {}, {v});
}

std::string OnnxGraph::const_float(float v) {
  uint32_t bits = 0;
  std::memcpy(&bits, &v, 4);
  const std::string name = "const_float_" + std::to_string(bits);  // the bits: exact and unique
  if (std::find(constants_.begin(), constants_.end(), name) != constants_.end()) return name;
  constants_.push_back(name);
  return floats(name, {}, &v);
}

void OnnxGraph::input(const std::string& name, onnx::TensorProto_DataType type, const std::vector<OnnxDim>& dims) {
  set_type(g_->add_input(), name, type, dims);
}

void OnnxGraph::output(const std::string& name, onnx::TensorProto_DataType type, const std::vector<OnnxDim>& dims) {
  set_type(g_->add_output(), name, type, dims);
}

}  // namespace trident::exporting
