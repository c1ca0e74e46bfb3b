// Reverse-mode autograd. An op that produced a tensor from inputs that require grad attaches
// a Node: the inputs (which keep the graph alive) and a backward function that maps the
// output's gradient to one gradient per input. Backward (autograd.cpp) walks the graph in
// reverse topological order without recursion, sums gradients that meet, accumulates into
// leaves' .grad and then runs the leaves' hooks (DDP starts bucket all-reduces from them).
// Op backward rules live next to their ops, in tensor/ops/*.cpp.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace ringlet::tensor {

// gradient of each input (an undefined Tensor where none flows or none is needed);
// needs[i] says whether input i wants one, so rules can skip work.
using BackwardFn =
    std::function<std::vector<Tensor>(const Tensor& grad_output, const std::vector<bool>& needs)>;

class Node {
 public:
  Node(std::string name, std::vector<Tensor> inputs, BackwardFn backward);
  const std::string& name() const { return name_; }
  const std::vector<Tensor>& inputs() const { return inputs_; }
  bool released() const { return released_; }
  // Runs the rule; throws AutogradError if the graph was already freed.
  std::vector<Tensor> apply(const Tensor& grad_output, const std::vector<bool>& needs);
  // Frees saved tensors and inputs (after a backward without retain_graph).
  void release();

 private:
  std::string name_;
  std::vector<Tensor> inputs_;
  BackwardFn backward_;
  bool released_ = false;
};

// Grad mode is per thread (as in PyTorch): ops record nodes only while it is on.
bool grad_enabled();
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// True when grad mode is on and any input requires grad.
bool any_requires_grad(const std::vector<Tensor>& inputs);

// Attaches a Node named `name` to `out` when any input requires grad (and grad mode is on);
// returns `out`. The rule must not capture `out` itself (that would be a cycle): capture
// out.detach() instead.
Tensor record(const char* name, Tensor out, std::vector<Tensor> inputs, BackwardFn backward);

// Called after each node's rule ran, with the time it took, on the thread running the
// backward, while set on that thread (the trainer's trace draws one span per node). An empty
// function clears it; the previous observer is returned, for the caller to put back.
using BackwardObserver =
    std::function<void(const Node& node, std::chrono::steady_clock::time_point start,
                       std::chrono::steady_clock::time_point end)>;
BackwardObserver set_backward_observer(BackwardObserver observer);

// Runs `callback` once the backward pass running on this thread has run every node and hook,
// before Tensor::backward returns; callbacks run in the order queued, and one may queue another
// (PyTorch's Engine::queue_callback). An exception from one ends the backward with it. Outside a
// backward pass: AutogradError.
void queue_backward_callback(std::function<void()> callback);

// The engine behind Tensor::backward.
void run_backward(const Tensor& root, const Tensor& gradient, bool retain_graph);

}  // namespace ringlet::tensor
