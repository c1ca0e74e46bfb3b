// Optimizer base: parameter checks, zero_grad, lazy per-parameter state and the state dict
// (flattened PyTorch layout: "state.<i>.<buffer>", "state.<i>.step", "param_groups.0.<h>").
// load_state_dict validates everything before it changes anything.
#include "nn/optimizer.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "tensor/ops.h"

namespace ringlet::nn {

using tensor::Tensor;

namespace detail {

bool cpu_has_fma() {
#if defined(__x86_64__)
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
#else
  return false;
#endif
}

}  // namespace detail

// --- NamedState ---------------------------------------------------------------------

void NamedState::set(const std::string& key, Value value) {
  auto it = index_.find(key);
  if (it != index_.end()) {
    entries_[it->second].second = std::move(value);
    return;
  }
  index_.emplace(key, entries_.size());
  entries_.emplace_back(key, std::move(value));
}

const NamedState::Value& NamedState::at(const std::string& key) const {
  auto it = index_.find(key);
  RINGLET_CHECK(it != index_.end(), ValueError, "state dict has no key '", key, "'");
  return entries_[it->second].second;
}

const Tensor& NamedState::tensor(const std::string& key) const {
  const Value& v = at(key);
  RINGLET_CHECK(std::holds_alternative<Tensor>(v), ValueError, "state dict key '", key,
                "' holds a scalar, expected a tensor");
  return std::get<Tensor>(v);
}

double NamedState::scalar(const std::string& key) const {
  const Value& v = at(key);
  RINGLET_CHECK(std::holds_alternative<double>(v), ValueError, "state dict key '", key,
                "' holds a tensor, expected a scalar");
  return std::get<double>(v);
}

std::vector<std::string> NamedState::keys() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& e : entries_) out.push_back(e.first);
  return out;
}

// --- Optimizer ----------------------------------------------------------------------

Optimizer::Optimizer(std::string name, std::vector<Tensor> params, double lr)
    : params_(std::move(params)), name_(std::move(name)), lr_(0), initial_lr_(0) {
  RINGLET_CHECK(!params_.empty(), ValueError, name_, ": got an empty parameter list");
  std::set<const tensor::TensorImpl*> seen;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    RINGLET_CHECK(p.defined(), ValueError, name_, ": parameter ", i, " is undefined");
    RINGLET_CHECK(p.is_leaf(), ValueError, name_, ": parameter ", i,
                  " is not a leaf tensor (it has a grad_fn); optimize the leaf instead");
    RINGLET_CHECK(p.dtype() == core::DType::f32 || p.dtype() == core::DType::f64, DTypeError, name_,
                  ": parameter ", i, " has dtype ", p.dtype(), "; expected f32 or f64");
    RINGLET_CHECK(p.is_contiguous(), ValueError, name_, ": parameter ", i, " of shape ",
                  tensor::shape_str(p.shape()), " is not contiguous");
    // A parameter listed twice would be updated twice per step.
    RINGLET_CHECK(seen.insert(&p.impl()).second, ValueError, name_, ": parameter ", i,
                  " appears more than once in the parameter list");
  }
  state_.resize(params_.size());
  set_lr(lr);
  initial_lr_ = lr;
}

void Optimizer::reset_lr(double lr) {
  set_lr(lr);
  initial_lr_ = lr;
}

void Optimizer::set_lr(double lr) {
  RINGLET_CHECK(std::isfinite(lr) && lr >= 0, ValueError, name_, ": invalid learning rate ", lr,
                " (must be finite and >= 0)");
  lr_ = lr;
}

void Optimizer::register_hyperparameter(std::string name, HyperparameterRef value) {
  hyperparameters_.emplace_back(std::move(name), value);
}

void Optimizer::zero_grad(bool set_to_none) {
  tensor::NoGradGuard no_grad;
  for (const Tensor& p : params_) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (set_to_none) {
      p.set_grad(Tensor());
    } else {
      tensor::zero_(g);
    }
  }
}

Tensor Optimizer::gradient_of(std::size_t index) const {
  const Tensor& p = params_[index];
  Tensor g = p.grad();
  if (!g.defined()) return g;
  RINGLET_CHECK(g.shape() == p.shape(), ShapeError, name_, ": parameter ", index, " has shape ",
                tensor::shape_str(p.shape()), " but its gradient has shape ",
                tensor::shape_str(g.shape()));
  RINGLET_CHECK(g.dtype() == p.dtype(), DTypeError, name_, ": parameter ", index, " has dtype ",
                p.dtype(), " but its gradient has dtype ", g.dtype());
  RINGLET_CHECK(g.device() == p.device(), DeviceError, name_, ": parameter ", index, " is on ",
                p.device(), " but its gradient on ", g.device());
  return g.is_contiguous() ? g : g.contiguous();
}

Optimizer::ParamState& Optimizer::state_for(std::size_t index) {
  ParamState& s = state_[index];
  if (!s.initialized) {
    const Tensor& p = params_[index];
    s.buffers.clear();
    for (std::size_t b = 0; b < buffer_names().size(); ++b) {
      s.buffers.push_back(tensor::zeros(p.shape(), p.dtype(), p.device()));
    }
    s.step = 0;
    s.initialized = true;
  }
  return s;
}

namespace {

const std::string kGroupPrefix = "param_groups.0.";
const std::string kStatePrefix = "state.";

}  // namespace

NamedState Optimizer::state_dict() const {
  NamedState out;
  const std::vector<std::string> names = buffer_names();
  for (std::size_t i = 0; i < state_.size(); ++i) {
    const ParamState& s = state_[i];
    if (!s.initialized) continue;
    const std::string prefix = kStatePrefix + std::to_string(i) + ".";
    for (std::size_t b = 0; b < names.size(); ++b) out.set(prefix + names[b], s.buffers[b].clone());
    if (has_step()) out.set(prefix + "step", s.step);
  }
  out.set(kGroupPrefix + "lr", lr_);
  out.set(kGroupPrefix + "initial_lr", initial_lr_);
  for (const auto& [name, ref] : hyperparameters_) {
    const double v = std::holds_alternative<double*>(ref) ? *std::get<double*>(ref)
                                                          : (*std::get<bool*>(ref) ? 1.0 : 0.0);
    out.set(kGroupPrefix + name, v);
  }
  return out;
}

namespace {

void check_lr_keys(const NamedState& state, const std::string& where) {
  for (const char* k : {"lr", "initial_lr"}) {
    const std::string key = kGroupPrefix + k;
    RINGLET_CHECK(state.contains(key), ValueError, where, "missing key '", key, "'");
    const double v = state.scalar(key);
    RINGLET_CHECK(std::isfinite(v) && v >= 0, ValueError, where, "key '", key, "' is ", v,
                  "; expected a finite value >= 0");
  }
}

// "state.<i>.<field>" -> (i, field), i below num_params.
std::pair<std::size_t, std::string> parse_state_key(const std::string& key, std::size_t num_params,
                                                    const std::string& where) {
  RINGLET_CHECK(key.rfind(kStatePrefix, 0) == 0, ValueError, where, "unexpected key '", key, "'");
  const std::size_t dot = key.find('.', kStatePrefix.size());
  const std::string index_text = key.substr(kStatePrefix.size(), dot - kStatePrefix.size());
  RINGLET_CHECK(dot != std::string::npos && !index_text.empty() && index_text.size() < 10 &&
                    index_text.find_first_not_of("0123456789") == std::string::npos,
                ValueError, where, "unexpected key '", key, "'");
  const std::size_t i = std::stoul(index_text);
  RINGLET_CHECK(i < num_params, ValueError, where, "key '", key, "' refers to parameter ", i,
                " but the optimizer has ", num_params, " parameters");
  return {i, key.substr(dot + 1)};
}

double read_step(const NamedState& state, const std::string& key, const std::string& where) {
  const double step = state.scalar(key);
  RINGLET_CHECK(step >= 1 && step == std::floor(step), ValueError, where, "key '", key, "' is ",
                step, "; expected a positive integer");
  return step;
}

// Parameter i's buffer under `key`: its shape, a floating dtype; returned as an owned,
// contiguous host copy in the parameter's dtype (PyTorch casts state too).
Tensor read_buffer(const NamedState& state, const std::string& key, const Tensor& param,
                   std::size_t i, const std::string& where) {
  const Tensor& t = state.tensor(key);
  RINGLET_CHECK(t.shape() == param.shape(), ShapeError, where, "key '", key, "' has shape ",
                tensor::shape_str(t.shape()), " but parameter ", i, " has shape ",
                tensor::shape_str(param.shape()));
  RINGLET_CHECK(core::is_floating(t.dtype()), DTypeError, where, "key '", key, "' has dtype ",
                t.dtype(), "; expected a floating dtype");
  return t.cpu().to(param.dtype()).contiguous().clone();
}

}  // namespace

void Optimizer::load_state_dict(const NamedState& state) {
  // Hyperparameters go first (amsgrad decides which buffers exist); they are rolled back if
  // anything below fails, so a failed load leaves the optimizer as it was.
  const HyperparameterValues old_values = hyperparameter_values();
  try {
    const std::string where = name_ + ".load_state_dict: ";
    load_hyperparameters(state, where);
    check_lr_keys(state, where);
    std::vector<ParamState> fresh = read_param_states(state, where);
    lr_ = state.scalar(kGroupPrefix + "lr");
    initial_lr_ = state.scalar(kGroupPrefix + "initial_lr");
    state_ = std::move(fresh);
  } catch (...) {
    set_hyperparameter_values(old_values);
    throw;
  }
}

Optimizer::HyperparameterValues Optimizer::hyperparameter_values() const {
  HyperparameterValues values;
  for (const auto& [name, ref] : hyperparameters_) {
    if (std::holds_alternative<double*>(ref)) {
      values.emplace_back(*std::get<double*>(ref));
    } else {
      values.emplace_back(*std::get<bool*>(ref));
    }
  }
  return values;
}

void Optimizer::set_hyperparameter_values(const HyperparameterValues& values) {
  for (std::size_t h = 0; h < hyperparameters_.size(); ++h) {
    const auto& ref = hyperparameters_[h].second;
    if (std::holds_alternative<double*>(ref)) {
      *std::get<double*>(ref) = std::get<double>(values[h]);
    } else {
      *std::get<bool*>(ref) = std::get<bool>(values[h]);
    }
  }
}

void Optimizer::load_hyperparameters(const NamedState& state, const std::string& where) {
  for (const auto& [name, ref] : hyperparameters_) {
    const std::string key = kGroupPrefix + name;
    RINGLET_CHECK(state.contains(key), ValueError, where, "missing key '", key, "'");
    const double v = state.scalar(key);
    if (std::holds_alternative<double*>(ref)) {
      *std::get<double*>(ref) = v;
    } else {
      RINGLET_CHECK(v == 0 || v == 1, ValueError, where, "key '", key, "' is ", v,
                    "; expected 0 or 1");
      *std::get<bool*>(ref) = v == 1;
    }
  }
  validate();
}

bool Optimizer::is_hyperparameter(const std::string& name) const {
  if (name == "lr" || name == "initial_lr") return true;
  for (const auto& hp : hyperparameters_) {
    if (hp.first == name) return true;
  }
  return false;
}

// Every "state.<i>.<field>" key into a fresh state per parameter; a parameter with any state
// must have all of it (every buffer this configuration keeps, and its step count).
std::vector<Optimizer::ParamState> Optimizer::read_param_states(const NamedState& state,
                                                                const std::string& where) const {
  const std::vector<std::string> names = buffer_names();
  std::vector<ParamState> fresh(params_.size());
  std::vector<std::set<std::string>> present(params_.size());
  for (const auto& [key, value] : state) {
    if (key.rfind(kGroupPrefix, 0) == 0) {
      RINGLET_CHECK(is_hyperparameter(key.substr(kGroupPrefix.size())), ValueError, where,
                    "unexpected key '", key, "'");
      continue;
    }
    const auto [i, field] = parse_state_key(key, params_.size(), where);
    ParamState& s = fresh[i];
    if (s.buffers.empty()) s.buffers.resize(names.size());
    if (field == "step" && has_step()) {
      s.step = read_step(state, key, where);
    } else {
      const auto b =
          static_cast<std::size_t>(std::find(names.begin(), names.end(), field) - names.begin());
      RINGLET_CHECK(b < names.size(), ValueError, where, "unexpected key '", key, "' for ", name_,
                    " with these settings");
      s.buffers[b] = read_buffer(state, key, params_[i], i, where);
    }
    present[i].insert(field);
    s.initialized = true;
  }
  std::vector<std::string> required = names;
  if (has_step()) required.push_back("step");
  for (std::size_t i = 0; i < params_.size(); ++i) {
    if (!fresh[i].initialized) continue;
    for (const std::string& field : required) {
      RINGLET_CHECK(present[i].count(field) != 0, ValueError, where, "missing key '", kStatePrefix,
                    i, ".", field, "' (parameter ", i, " has other state)");
    }
  }
  return fresh;
}

}  // namespace ringlet::nn
