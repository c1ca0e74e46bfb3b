// Module: the base of every layer and model. A module owns named parameters (leaf tensors that
// require grad) and buffers (state such as BatchNorm's running statistics), in registration
// order, and named child modules. Traversals follow PyTorch exactly: a module's own
// parameters, then its own buffers, then each child recursively, which gives PyTorch's
// state_dict key names and order ("0.weight", "layer1.0.bn1.running_mean").
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "tensor/tensor.h"

namespace ringlet::nn {

using tensor::Tensor;

// load_state_dict's error: names every missing key, unexpected key and shape mismatch.
class StateDictError : public core::ValueError {
 public:
  using core::ValueError::ValueError;
};

// An ordered name -> Tensor map (insertion order kept, as PyTorch's OrderedDict), the
// exchange format of state_dict / load_state_dict and of checkpoints.
class StateDict {
 public:
  using Entry = std::pair<std::string, Tensor>;

  // Throws ValueError on a duplicate name.
  void insert(std::string name, Tensor value);
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  // Throws ValueError naming the key when it is absent.
  const Tensor& at(const std::string& name) const;
  std::size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  std::vector<std::string> keys() const;
  std::vector<Entry>::const_iterator begin() const { return entries_.begin(); }
  std::vector<Entry>::const_iterator end() const { return entries_.end(); }

 private:
  std::vector<Entry> entries_;
  std::map<std::string, std::size_t> index_;
};

// What a non-strict load_state_dict skipped (PyTorch's _IncompatibleKeys).
struct LoadResult {
  std::vector<std::string> missing_keys;
  std::vector<std::string> unexpected_keys;
};

// 2-D sizes of kernels, strides and paddings; a single number means (n, n) as in PyTorch.
struct Size2 {
  std::int64_t h = 0, w = 0;
  Size2(std::int64_t n) : h(n), w(n) {}  // NOLINT: implicit on purpose, like PyTorch's ints
  Size2(std::int64_t h_, std::int64_t w_) : h(h_), w(w_) {}
  bool operator==(const Size2&) const = default;
  std::string str() const;  // "(3, 3)"
};

// Modules are shared (shared_ptr) and never copied: parameters are identified by their
// tensor handles, which optimizers and DDP hold on to. Not thread-safe: one thread builds and
// runs a module at a time.
class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  virtual Tensor forward(const Tensor& input) = 0;
  Tensor operator()(const Tensor& input) { return forward(input); }

  // "Linear", "Conv2d", ...: the summary's type column. By default the class's own name, without
  // namespaces or template arguments (PyTorch's `type(module).__name__`).
  virtual std::string type_name() const;
  // The text between the parentheses of the summary line: "in_features=3, out_features=4".
  virtual std::string extra_repr() const { return ""; }

  // --- traversal (registration order, recursive, PyTorch's dotted names) ---
  // The leaf tensors (requires_grad) that backward fills; a tensor shared by two modules
  // appears once.
  std::vector<Tensor> parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;
  // Direct children only.
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const {
    return children_;
  }
  // This module ("" as its name) and every descendant, pre-order.
  std::vector<std::pair<std::string, const Module*>> named_modules() const;

  // --- mode ---
  // Sets training mode on this module and every descendant (BatchNorm, Dropout read it).
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // --- state ---
  // Parameters and buffers by dotted name, PyTorch's order. Values are detached handles that
  // share storage with the module (as PyTorch's state_dict): copy them to keep a snapshot.
  StateDict state_dict() const;
  // Copies every value into the module's existing tensors (in place, so optimizers keep
  // their handles; dtypes convert). Shape mismatches always throw StateDictError; with
  // strict, missing and unexpected keys do too. One error lists all problems. Nothing is
  // copied when it throws.
  LoadResult load_state_dict(const StateDict& dict, bool strict = true);

  // Number of parameter elements (trainable values), recursively.
  std::int64_t num_parameters() const;
  // Drops every parameter's gradient (PyTorch's zero_grad(set_to_none=True)): the next
  // backward writes fresh gradients instead of accumulating.
  void zero_grad();
  // Moves every parameter and buffer to `device` in place (torch's module.to(device)): each
  // tensor keeps its identity, so optimizers and layers holding it see the move; gradients
  // are dropped.
  void to(core::Device device);

  // One line per module (pre-order, indented by depth): name, type(extra_repr), the number
  // of parameters it and its descendants hold; then the total.
  std::string summary() const;

 protected:
  // Registers a leaf parameter: sets requires_grad; returns the stored handle.
  Tensor register_parameter(const std::string& name, Tensor value);
  // Registers a buffer (no gradient), saved in the state dict.
  Tensor register_buffer(const std::string& name, Tensor value);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> child) {
    add_child(name, child);
    return child;
  }
  void add_child(const std::string& name, std::shared_ptr<Module> child);

 private:
  void check_new_name(const std::string& name) const;
  void collect(const std::string& prefix, bool params, bool buffers,
               std::vector<std::pair<std::string, Tensor>>& out) const;

  bool training_ = true;
  std::vector<std::pair<std::string, Tensor>> parameters_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

// "421,834": thousands separators for parameter counts.
std::string format_count(std::int64_t n);

}  // namespace ringlet::nn
