// Optimizer: the base of SGD, Adam and AdamW. It holds one group of parameters (leaf tensors,
// f32 or f64, contiguous, on the host or a device) with one learning rate, per-parameter state
// created lazily on a parameter's first step with a gradient (as PyTorch), on the parameter's
// device, and the state dict that checkpoints carry (a host copy). On the host an update is one
// loop over each parameter's contiguous data; on a device, one multi-tensor launch per device
// and dtype over all its parameters (device_groups.h). A parameter whose .grad is undefined is
// skipped and its state is left alone.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "tensor/tensor.h"

namespace ringlet::nn {

// An insertion-ordered map of named tensors and scalars: the state of an optimizer or an LR
// schedule, as a checkpoint stores it. Keys follow PyTorch's nesting flattened with dots
// ("state.3.exp_avg", "state.3.step", "param_groups.0.lr").
class NamedState {
 public:
  using Value = std::variant<tensor::Tensor, double>;
  using Entry = std::pair<std::string, Value>;

  // Appends `key`, or replaces its value where it exists (keeping its position).
  void set(const std::string& key, Value value);
  bool contains(const std::string& key) const { return index_.count(key) != 0; }
  // The value of `key`; a ValueError names a key that is missing or holds the other kind.
  const Value& at(const std::string& key) const;
  const tensor::Tensor& tensor(const std::string& key) const;
  double scalar(const std::string& key) const;
  std::vector<std::string> keys() const;

  std::size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  std::vector<Entry>::const_iterator begin() const { return entries_.begin(); }
  std::vector<Entry>::const_iterator end() const { return entries_.end(); }

 private:
  std::vector<Entry> entries_;
  std::map<std::string, std::size_t> index_;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter that has a gradient. Runs under NoGradGuard internally.
  virtual void step() = 0;

  // Clears gradients. set_to_none=true (the default, as in PyTorch 2) drops each .grad so the
  // next backward allocates a fresh one: cheaper than zeroing, and step() then skips
  // parameters that got no gradient. set_to_none=false zeroes the existing buffers in place
  // (what a caller that holds on to the grad tensors, e.g. a gradient bucket, needs).
  void zero_grad(bool set_to_none = true);

  // The learning rate the next step() uses; LR schedules read and write it.
  double lr() const { return lr_; }
  void set_lr(double lr);  // ValueError when negative or not finite
  // The learning rate at construction: the base LR that schedules start from (PyTorch's
  // param_group['initial_lr']).
  double initial_lr() const { return initial_lr_; }
  // Sets both, as an optimizer constructed with `lr` has them (a resumed run whose command
  // changes the lr starts its schedule anew from there).
  void reset_lr(double lr);

  const std::vector<tensor::Tensor>& parameters() const { return params_; }

  // Graph capture (tensor/device/graph.h). A captured step replays the kernel arguments it was
  // captured with, so what changes from step to step must be read from device memory.
  // prepare_capture() moves it there and says whether this optimizer can be captured ("" yes;
  // else why not: Adam's bias corrections follow the host's step count). From then on,
  // stage_step() must run before each step, replayed or not: it copies this step's values
  // (SGD: the learning rate) to the device, outside the graph.
  virtual std::string prepare_capture(core::Device device) {
    (void)device;
    return name_ + "'s step is not captured yet";
  }
  virtual void stage_step() {}

  // Name of the algorithm, for errors ("SGD", "Adam", "AdamW").
  const std::string& name() const { return name_; }

  // Snapshot of the state: per-parameter buffers (cloned, so later steps do not change it)
  // and step counts under "state.<param index>.<name>" for parameters that have state, then
  // the hyperparameters under "param_groups.0.<name>" (lr, initial_lr and the algorithm's).
  NamedState state_dict() const;
  // Replaces the state with `state` (copied). Hyperparameters are restored as in PyTorch.
  // Throws ValueError naming the key on a missing or unexpected key, a parameter index out of
  // range or a hyperparameter out of range, and ShapeError naming the key on a buffer whose
  // shape is not its parameter's; on error nothing changes.
  void load_state_dict(const NamedState& state);
  // Whether parameter `index` has per-parameter state yet (it does after its first update,
  // when the configuration keeps any).
  bool has_state(std::size_t index) const {
    return index < state_.size() && state_[index].initialized;
  }

 protected:
  struct ParamState {
    bool initialized = false;
    double step = 0;                      // updates applied to this parameter
    std::vector<tensor::Tensor> buffers;  // same order as buffer_names()
  };

  // Checks the parameters (defined, leaf, f32/f64, contiguous, no duplicates).
  Optimizer(std::string name, std::vector<tensor::Tensor> params, double lr);

  // Per-parameter buffers this configuration keeps, by name ("momentum_buffer", ...).
  virtual std::vector<std::string> buffer_names() const = 0;
  // Whether the per-parameter state has a "step" count.
  virtual bool has_step() const = 0;
  // Throws ValueError on a hyperparameter out of range.
  virtual void validate() const = 0;

  // Makes a hyperparameter other than lr (a member of the derived class, which outlives
  // this base) part of the state dict, booleans as 0/1; load_state_dict writes through the
  // pointer, then calls validate().
  using HyperparameterRef = std::variant<double*, bool*>;
  void register_hyperparameter(std::string name, HyperparameterRef value);

  // The parameter's gradient as a contiguous tensor of the parameter's dtype and shape, or
  // an undefined tensor when it has none.
  tensor::Tensor gradient_of(std::size_t index) const;
  // Creates the zero-filled buffers of parameter `index` on its first step.
  ParamState& state_for(std::size_t index);

  std::vector<tensor::Tensor> params_;
  std::vector<ParamState> state_;

 private:
  // The steps of load_state_dict.
  using HyperparameterValues = std::vector<std::variant<double, bool>>;
  HyperparameterValues hyperparameter_values() const;
  void set_hyperparameter_values(const HyperparameterValues& values);
  void load_hyperparameters(const NamedState& state, const std::string& where);
  bool is_hyperparameter(const std::string& name) const;  // lr, initial_lr or registered
  std::vector<ParamState> read_param_states(const NamedState& state,
                                            const std::string& where) const;

  std::string name_;
  std::vector<std::pair<std::string, HyperparameterRef>> hyperparameters_;
  double lr_;
  double initial_lr_;
};

namespace detail {

// True when the CPU is x86 with AVX2 and FMA (checked once). Update loops then run a copy compiled
// for those instructions; the portable copy calls libm's fma and rounds identically, so
// results never depend on the CPU, only speed does.
bool cpu_has_fma();

// The attribute of an update loop whose products PyTorch rounds separately: GCC must not fuse
// them into FMAs. Clang has no optimize attribute; meson.build passes it -ffp-contract=off.
#if defined(__clang__)
#define RINGLET_NO_FP_CONTRACT
#else
#define RINGLET_NO_FP_CONTRACT gnu::optimize("fp-contract=off")
#endif

// a * b + c rounded once, and sqrt, as builtins: update loops carry optimize attributes, which
// keep GCC from inlining std::fma / std::sqrt into them (the loop would then call libm per
// element); builtins expand in place.
[[gnu::always_inline]] inline float fused_mul_add(float a, float b, float c) {
  return __builtin_fmaf(a, b, c);
}
[[gnu::always_inline]] inline double fused_mul_add(double a, double b, double c) {
  return __builtin_fma(a, b, c);
}
[[gnu::always_inline]] inline float square_root(float x) { return __builtin_sqrtf(x); }
[[gnu::always_inline]] inline double square_root(double x) { return __builtin_sqrt(x); }

}  // namespace detail

}  // namespace ringlet::nn
