// The autograd graph. Each recorded operation becomes a Node; edges point from a node to the
// nodes that produced its inputs (toward the leaves). backward() walks them in reverse
// creation order (autograd/engine.h).
//
// A Node receives one gradient per output and returns one (optional) gradient per input.
// Two kinds exist: FunctionNode, whose backward rule is a closure written next to the op's
// forward in autograd/derivatives/, and AccumulateGrad, which adds into a leaf's .grad and
// then runs the leaf's grad-ready hooks.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autograd/op_registry.h"
#include "core/tensor.h"

namespace trident::autograd {

class Node;

struct Edge {
  std::shared_ptr<Node> node;  // null when the input needs no gradient
  int input_nr = 0;            // which output of `node` the input was
};

// Shape, dtype and device of a tensor: what a gradient for it must look like.
struct TensorMeta {
  Shape shape;
  DType dtype;
  Device device;
  static TensorMeta of(const Tensor& t) { return {t.shape(), t.dtype(), t.device()}; }
};

using GradList = std::vector<std::optional<Tensor>>;

class Node : public std::enable_shared_from_this<Node> {
 public:
  Node(const char* name, uint64_t sequence_nr) : name_(name), sequence_nr_(sequence_nr) {}
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // grads: one per output, never absent (the engine fills zeros). Returns one per input.
  virtual GradList apply(std::vector<Tensor>&& grads) = 0;
  // Frees what was saved for backward once the node has run (unless retain_graph).
  virtual void release_saved() {}

  const char* name() const { return name_; }
  // Later-created nodes run first: backward visits ops in reverse order of the forward.
  uint64_t sequence_nr() const { return sequence_nr_; }

  std::vector<Edge> next_edges;        // one per input
  std::vector<TensorMeta> input_meta;  // one per input, to validate returned gradients
  std::vector<TensorMeta> output_meta; // one per output, to build zero gradients

  static uint64_t next_sequence_nr();

 private:
  const char* name_;
  uint64_t sequence_nr_;
};

// Everything a backward rule sees: the gradients of the op's outputs, and which inputs need one.
struct BackwardContext {
  std::vector<Tensor> grads;
  std::vector<bool> needs_input_grad;
  const Tensor& grad(int i = 0) const { return grads[static_cast<size_t>(i)]; }
  bool needs(int i) const { return needs_input_grad[static_cast<size_t>(i)]; }
};

using BackwardFn = std::function<GradList(const BackwardContext&)>;

class FunctionNode final : public Node {
 public:
  FunctionNode(const OpDef& op, BackwardFn backward)
      : Node(op.name, next_sequence_nr()), backward_(std::move(backward)) {}
  GradList apply(std::vector<Tensor>&& grads) override;
  void release_saved() override {
    backward_ = nullptr;
    released_ = true;
  }

 private:
  BackwardFn backward_;
  bool released_ = false;
};

// Adds incoming gradients into a leaf's .grad, then fires its grad-ready hooks: at that
// point the leaf's gradient for this backward pass is final (the engine runs a node only
// after every contribution has arrived).
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf)
      : Node("AccumulateGrad", std::numeric_limits<uint64_t>::max()), leaf_(std::move(leaf)) {}
  GradList apply(std::vector<Tensor>&& grads) override;

 private:
  std::shared_ptr<TensorImpl> leaf_;
};

// A value saved for backward. Remembers the storage version at save time and refuses to
// hand back a tensor that an in-place op modified since (its gradient would be wrong).
// Outputs are saved detached, so a node never owns the tensor that owns it (no cycle).
class SavedTensor {
 public:
  explicit SavedTensor(const Tensor& input) : tensor_(input), version_(input.version()) {}
  static SavedTensor output(const Tensor& out) { return SavedTensor(detach(out)); }
  const Tensor& get() const;

 private:
  Tensor tensor_;
  uint64_t version_;
};

// The edge a gradient for `t` must flow along: its producer, its leaf accumulator, or none.
Edge gradient_edge(const Tensor& t);

}  // namespace trident::autograd
