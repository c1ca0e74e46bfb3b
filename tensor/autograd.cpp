// The autograd engine: iterative topological sort (an explicit stack, so a 10,000-op chain
// cannot overflow the call stack), dependency counting, gradient summation where paths meet,
// accumulation into leaves and their hooks once a leaf's gradient is final, then the callbacks
// the hooks queued.
#include "tensor/autograd.h"

#include <functional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "device/op_context.h"
#include "tensor/ops/elementwise.h"

namespace ringlet::tensor {
namespace {
thread_local bool t_grad_enabled = true;
thread_local BackwardObserver t_backward_observer;
// The callbacks of the backward pass running on this thread; null outside one.
thread_local std::vector<std::function<void()>>* t_callbacks = nullptr;

// Makes `callbacks` the thread's queue for one backward pass; the previous queue (a backward
// run from a hook or a callback) is put back after.
class CallbackQueue {
 public:
  CallbackQueue() : previous_(std::exchange(t_callbacks, &callbacks_)) {}
  ~CallbackQueue() { t_callbacks = previous_; }
  CallbackQueue(const CallbackQueue&) = delete;
  CallbackQueue& operator=(const CallbackQueue&) = delete;

  // By index: a callback may queue another.
  void run_all() {
    for (std::size_t i = 0; i < callbacks_.size(); ++i) {
      std::function<void()> callback = std::move(callbacks_[i]);
      callback();
    }
  }

 private:
  std::vector<std::function<void()>> callbacks_;
  std::vector<std::function<void()>>* previous_;
};

// Runs a node's backward with the thread's op context naming it (device/op_context.h).
std::vector<Tensor> apply_noted(Node& node, const Tensor& grad_output,
                                const std::vector<bool>& needs) {
  struct Note {
    explicit Note(const std::string& name) { device::detail::note_backward_op(&name); }
    ~Note() { device::detail::note_backward_op(nullptr); }
  } note(node.name());
  return node.apply(grad_output, needs);
}

std::vector<Tensor> apply_observed(Node& node, const Tensor& grad_output,
                                   const std::vector<bool>& needs) {
  if (!t_backward_observer) return apply_noted(node, grad_output, needs);
  const auto start = std::chrono::steady_clock::now();
  std::vector<Tensor> grads = apply_noted(node, grad_output, needs);
  t_backward_observer(node, start, std::chrono::steady_clock::now());
  return grads;
}
}  // namespace

void queue_backward_callback(std::function<void()> callback) {
  RINGLET_CHECK(t_callbacks != nullptr, AutogradError,
                "queue_backward_callback outside a backward pass: call it from a gradient hook");
  t_callbacks->push_back(std::move(callback));
}

BackwardObserver set_backward_observer(BackwardObserver observer) {
  return std::exchange(t_backward_observer, std::move(observer));
}

Node::Node(std::string name, std::vector<Tensor> inputs, BackwardFn backward)
    : name_(std::move(name)), inputs_(std::move(inputs)), backward_(std::move(backward)) {}

std::vector<Tensor> Node::apply(const Tensor& grad_output, const std::vector<bool>& needs) {
  RINGLET_CHECK(!released_, AutogradError, "backward through ", name_,
                " a second time: its saved tensors were freed after the first backward; "
                "pass retain_graph=true to the first backward to keep them");
  return backward_(grad_output, needs);
}

void Node::release() {
  released_ = true;
  backward_ = nullptr;
  inputs_.clear();
}

bool grad_enabled() { return t_grad_enabled; }

NoGradGuard::NoGradGuard() : previous_(t_grad_enabled) { t_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { t_grad_enabled = previous_; }

bool any_requires_grad(const std::vector<Tensor>& inputs) {
  if (!t_grad_enabled) return false;
  for (const auto& t : inputs) {
    if (t.defined() && t.requires_grad()) return true;
  }
  return false;
}

Tensor record(const char* name, Tensor out, std::vector<Tensor> inputs, BackwardFn backward) {
  device::detail::note_forward_op(name);
  if (!any_requires_grad(inputs)) return out;
  auto& impl = out.impl();
  impl.requires_grad = true;
  impl.grad_fn = std::make_shared<Node>(name, std::move(inputs), std::move(backward));
  return out;
}

namespace {

void check_grad_shape(const Tensor& grad, const Tensor& input, const std::string& where) {
  RINGLET_CHECK(grad.shape() == input.shape(), AutogradError, where, ": gradient of shape ",
                shape_str(grad.shape()), " for an input of shape ", shape_str(input.shape()));
  RINGLET_CHECK(grad.dtype() == input.dtype(), AutogradError, where, ": gradient of dtype ",
                grad.dtype(), " for an input of dtype ", input.dtype());
}

void accumulate(Tensor& slot, Tensor grad) {
  slot = slot.defined() ? add(slot, grad) : std::move(grad);
}

// Whether nothing but `t` can see its memory: its handle and its storage have no other owner,
// and it is contiguous (not a window on a larger buffer).
bool sole_owner(const Tensor& t) {
  return t.impl_ptr().use_count() == 1 && t.storage().use_count() == 1 && t.is_contiguous();
}

void finish_leaf(const Tensor& leaf, Tensor grad) {
  Tensor existing = leaf.grad();
  // A gradient no one else holds is adopted as it is; any other is copied, since it may alias
  // another leaf's gradient, a view of an upstream gradient or the caller's tensor (PyTorch's
  // AccumulateGrad steals in the same way).
  if (existing.defined()) {
    leaf.set_grad(add(existing, grad));
  } else {
    leaf.set_grad(sole_owner(grad) ? std::move(grad) : grad.clone());
  }
  const Tensor final_grad = leaf.grad();
  for (const auto& hook : leaf.impl().hooks) hook(final_grad);
}

// The gradient backward starts from: the given one, or 1 for a one-element output.
Tensor seed_gradient(const Tensor& root, const Tensor& gradient) {
  RINGLET_CHECK(root.requires_grad(), AutogradError,
                "backward on a tensor that does not require grad (shape ", shape_str(root.shape()),
                "); set requires_grad on the leaves first");
  Tensor seed = gradient;
  if (!seed.defined()) {
    RINGLET_CHECK(root.numel() == 1, AutogradError,
                  "backward without a gradient needs a one-element output, got shape ",
                  shape_str(root.shape()));
    seed = Tensor::empty(root.shape(), root.dtype(), root.device());
    fill_(seed, 1.0);
  }
  check_grad_shape(seed, root, "backward");
  return seed;
}

// For every node and leaf below the root, how many graph edges feed it a gradient.
struct Dependencies {
  std::unordered_map<Node*, int> nodes;
  std::unordered_map<TensorImpl*, int> leaves;
};

Dependencies count_dependencies(Node* root) {
  Dependencies deps;
  std::vector<Node*> stack{root};
  deps.nodes[root] = 0;
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    RINGLET_CHECK(!node->released(), AutogradError, "backward through ", node->name(),
                  " a second time: its saved tensors were freed after the first backward; "
                  "pass retain_graph=true to the first backward to keep them");
    for (const auto& input : node->inputs()) {
      if (!input.defined() || !input.requires_grad()) continue;
      if (input.is_leaf()) {
        ++deps.leaves[input.impl_ptr().get()];
      } else {
        Node* next = input.grad_fn().get();
        auto [it, fresh] = deps.nodes.try_emplace(next, 0);
        ++it->second;
        if (fresh) stack.push_back(next);
      }
    }
  }
  return deps;
}

// Runs nodes whose every consumer has delivered its gradient, summing gradients where paths
// meet; a leaf is finished once the last of its gradients has arrived.
class GraphTask {
 public:
  GraphTask(Dependencies deps, bool retain_graph)
      : deps_(std::move(deps)), retain_graph_(retain_graph) {}

  void run(const std::shared_ptr<Node>& root, const Tensor& seed) {
    node_grads_[root.get()] = seed;
    ready_.push_back(root);
    while (!ready_.empty()) {
      std::shared_ptr<Node> node = std::move(ready_.back());
      ready_.pop_back();
      run_node(*node);
    }
  }

 private:
  void run_node(Node& node) {
    Tensor grad_out = std::move(node_grads_[&node]);
    node_grads_.erase(&node);
    const auto inputs = node.inputs();  // copy: release() below clears them
    std::vector<bool> needs(inputs.size());
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      needs[i] = inputs[i].defined() && inputs[i].requires_grad();
    }
    // A branch that no gradient reached still runs, with no gradients, so the dependency
    // counts below it reach zero and leaves fed by other paths are finished.
    std::vector<Tensor> grads = grad_out.defined() ? apply_observed(node, grad_out, needs)
                                                   : std::vector<Tensor>(inputs.size());
    RINGLET_CHECK(grads.size() == inputs.size(), AutogradError, node.name(), " returned ",
                  grads.size(), " gradients for ", inputs.size(), " inputs");
    if (!retain_graph_) node.release();
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      if (!needs[i]) continue;
      if (grads[i].defined()) check_grad_shape(grads[i], inputs[i], node.name());
      deliver(inputs[i], std::move(grads[i]));
    }
  }

  // One edge's gradient (possibly undefined: nothing reached it) to the input it belongs to.
  void deliver(const Tensor& input, Tensor grad) {
    const bool has_grad = grad.defined();
    if (input.is_leaf()) {
      TensorImpl* key = input.impl_ptr().get();
      if (has_grad) accumulate(leaf_grads_[key], std::move(grad));
      if (--deps_.leaves[key] == 0) {
        auto it = leaf_grads_.find(key);
        if (it != leaf_grads_.end()) finish_leaf(input, std::move(it->second));
        leaf_grads_.erase(key);
      }
    } else {
      Node* next = input.grad_fn().get();
      if (has_grad) accumulate(node_grads_[next], std::move(grad));
      if (--deps_.nodes[next] == 0) ready_.push_back(input.grad_fn());
    }
  }

  Dependencies deps_;
  bool retain_graph_;
  std::unordered_map<Node*, Tensor> node_grads_;
  std::unordered_map<TensorImpl*, Tensor> leaf_grads_;
  std::vector<std::shared_ptr<Node>> ready_;
};

}  // namespace

void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph) {
  const Tensor seed = seed_gradient(root, gradient);
  NoGradGuard no_grad;  // gradients are plain tensors (no higher-order graphs)
  CallbackQueue callbacks;
  if (root.is_leaf()) {
    finish_leaf(root, seed);
  } else {
    GraphTask task(count_dependencies(root.grad_fn().get()), retain_graph);
    task.run(root.grad_fn(), seed);
  }
  callbacks.run_all();
}

// --- Tensor's autograd methods ---

Tensor& Tensor::requires_grad_(bool value) {
  RINGLET_CHECK(is_leaf() || value, AutogradError,
                "requires_grad_(false) on a non-leaf tensor; use detach()");
  RINGLET_CHECK(!value || core::is_floating(dtype()), DTypeError,
                "only floating-point tensors can require gradients, got ", dtype());
  impl().requires_grad = value;
  return *this;
}

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  run_backward(*this, gradient, retain_graph);
}

Tensor Tensor::detach() const {
  return make_view(storage(), shape(), strides(), offset(), dtype());
}

void Tensor::register_hook(GradHook hook) const {
  RINGLET_CHECK(is_leaf() && requires_grad(), AutogradError,
                "register_hook needs a leaf tensor that requires grad");
  impl().hooks.push_back(std::move(hook));
}

}  // namespace ringlet::tensor
