#include "autograd/engine.h"

#include <queue>
#include <unordered_map>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "core/factory.h"
#include "core/profiler.h"
#include "ops/elementwise.h"

namespace trident::autograd {
namespace {

struct NodeState {
  int dependencies = 0;             // incoming edges not yet delivered
  std::vector<std::optional<Tensor>> grads;  // one per output of the node, summed as they come
};

struct LaterFirst {
  bool operator()(const Node* a, const Node* b) const { return a->sequence_nr() < b->sequence_nr(); }
};

void accumulate(std::optional<Tensor>& slot, Tensor g) {
  if (!slot.has_value()) {
    slot = std::move(g);
  } else {
    profiler::ProfileScope scope("autograd.sum_grads", profiler::Phase::kBackward);
    slot = ops::add(*slot, g);
  }
}

void check_grad(const Node& node, size_t input, const Tensor& g) {
  const TensorMeta& m = node.input_meta[input];
  TRI_ASSERT(g.shape() == m.shape && g.dtype() == m.dtype && g.device() == m.device,
             "the backward of '", node.name(), "' returned a gradient for input ", input,
             " with shape ", g.shape(), ", dtype ", g.dtype(), ", device ", g.device(),
             "; the input has shape ", m.shape, ", dtype ", m.dtype, ", device ", m.device, ".");
}

}  // namespace

void backward(const Tensor& root, BackwardOptions options) {
  backward(std::vector<Tensor>{root}, {std::nullopt}, options);
}

void backward(const std::vector<Tensor>& roots, const std::vector<std::optional<Tensor>>& grads,
              BackwardOptions options) {
  TRI_CHECK(roots.size() == grads.size(), "backward: ", roots.size(), " roots but ", grads.size(),
            " gradients");
  NoGradGuard no_grad;  // backward rules never record history
  // The engine's own time (graph discovery, scheduling, zero gradients) is this scope's self
  // time; each node is a scope of its own, named by its op.
  profiler::ProfileScope scope("autograd.engine", profiler::Phase::kBackward);

  // Seed gradients and the root edges.
  std::vector<std::pair<Edge, Tensor>> seeds;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    TRI_CHECK(r.requires_grad(), "backward: root ", i, " (", r.str(),
              ") does not require grad and has no grad_fn; nothing to differentiate");
    Tensor g = grads[i].has_value() ? *grads[i] : [&] {
      TRI_CHECK(r.numel() == 1, "backward: an implicit gradient can only be created for a "
                                "one-element root; root ", i, " has shape ", r.shape(),
                                ". Pass a gradient of that shape.");
      return ones(r.shape(), r.dtype(), r.device());
    }();
    TRI_CHECK(g.shape() == r.shape() && g.dtype() == r.dtype(), "backward: gradient ", i,
              " has shape ", g.shape(), " and dtype ", g.dtype(), "; root has shape ", r.shape(),
              " and dtype ", r.dtype());
    seeds.emplace_back(gradient_edge(r), g);
  }

  // Discover the graph and count incoming edges per node.
  std::unordered_map<Node*, NodeState> state;
  std::vector<Node*> stack;
  auto visit = [&](Node* n) {
    auto [it, inserted] = state.try_emplace(n);
    if (inserted) {
      it->second.grads.resize(std::max<size_t>(n->output_meta.size(), 1));
      stack.push_back(n);
    }
    return &it->second;
  };
  for (auto& [edge, g] : seeds) visit(edge.node.get());
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges)
      if (e.node) visit(e.node.get())->dependencies++;
  }

  std::priority_queue<Node*, std::vector<Node*>, LaterFirst> ready;
  for (auto& [edge, g] : seeds) {
    NodeState& s = state[edge.node.get()];
    accumulate(s.grads[static_cast<size_t>(edge.input_nr)], g);
  }
  for (auto& [node, s] : state)
    if (s.dependencies == 0) ready.push(node);

  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    NodeState& s = state[node];
    bool any = false;
    for (auto& g : s.grads) any = any || g.has_value();
    GradList input_grads;
    if (any) {
      std::vector<Tensor> out_grads;
      out_grads.reserve(s.grads.size());
      for (size_t i = 0; i < s.grads.size(); ++i) {
        if (s.grads[i].has_value()) {
          out_grads.push_back(std::move(*s.grads[i]));
        } else {
          const TensorMeta& m = node->output_meta[i];
          out_grads.push_back(zeros(m.shape, m.dtype, m.device));
        }
      }
      s.grads.clear();
      try {
        profiler::ProfileScope node_scope(node->name(), profiler::Phase::kBackward);
        input_grads = node->apply(std::move(out_grads));
      } catch (const Error& e) {
        if (e.kind() == ErrorKind::kInternal) throw;
        TRI_THROW(e.kind(), "in the backward of '", node->name(), "': ", e.message());
      }
      if (!options.retain_graph) node->release_saved();
      TRI_ASSERT(input_grads.empty() || input_grads.size() == node->next_edges.size(),
                 "the backward of '", node->name(), "' returned ", input_grads.size(),
                 " gradients for ", node->next_edges.size(), " inputs");
    }
    for (size_t i = 0; i < node->next_edges.size(); ++i) {
      const Edge& e = node->next_edges[i];
      if (!e.node) continue;
      NodeState& next = state[e.node.get()];
      if (i < input_grads.size() && input_grads[i].has_value()) {
        check_grad(*node, i, *input_grads[i]);
        accumulate(next.grads[static_cast<size_t>(e.input_nr)], std::move(*input_grads[i]));
      }
      if (--next.dependencies == 0) ready.push(e.node.get());
    }
  }
}

void register_grad_ready_hook(const Tensor& leaf, GradReadyHook fn) {
  TRI_CHECK(leaf.is_leaf() && leaf.requires_grad(), "register_grad_ready_hook: ", leaf.str(),
            " is not a leaf that requires grad");
  leaf.impl().autograd().grad_ready_hooks.push_back(std::move(fn));
}

}  // namespace trident::autograd
