// Module traversal, modes, state dicts and the summary. Names are checked at registration
// (non-empty, no '.', unique among a module's parameters, buffers and children) so that the
// dotted state-dict names are unambiguous.
#include "nn/module.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <set>
#include <sstream>
#include <typeinfo>

#include "tensor/autograd.h"
#include "tensor/ops/elementwise.h"

namespace ringlet::nn {

std::string Module::type_name() const {
  const char* mangled = typeid(*this).name();
  int status = 0;
  const std::unique_ptr<char, void (*)(void*)> demangled(
      abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
  std::string name = status == 0 ? demangled.get() : mangled;
  // "ns::Net<a::B<int>>" -> "ns::Net": the template arguments at the end, balanced.
  if (!name.empty() && name.back() == '>') {
    int depth = 0;
    for (std::size_t i = name.size(); i-- > 0;) {
      depth += name[i] == '>' ? 1 : name[i] == '<' ? -1 : 0;
      if (depth == 0) {
        name.resize(i);
        break;
      }
    }
  }
  const std::size_t colons = name.rfind("::");
  return colons == std::string::npos ? name : name.substr(colons + 2);
}

// --- StateDict ---

void StateDict::insert(std::string name, Tensor value) {
  RINGLET_CHECK(!contains(name), ValueError, "StateDict: duplicate key '", name, "'");
  index_.emplace(name, entries_.size());
  entries_.emplace_back(std::move(name), std::move(value));
}

const Tensor& StateDict::at(const std::string& name) const {
  const auto it = index_.find(name);
  RINGLET_CHECK(it != index_.end(), ValueError, "StateDict: no key '", name, "'");
  return entries_[it->second].second;
}

std::vector<std::string> StateDict::keys() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& [name, value] : entries_) out.push_back(name);
  return out;
}

std::string Size2::str() const { return core::str("(", h, ", ", w, ")"); }

std::string format_count(std::int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

// --- registration ---

void Module::check_new_name(const std::string& name) const {
  RINGLET_CHECK(!name.empty() && name.find('.') == std::string::npos, ValueError, type_name(),
                ": invalid member name '", name, "' (must be non-empty and contain no '.')");
  auto taken = [&](const auto& list) {
    return std::any_of(list.begin(), list.end(), [&](const auto& e) { return e.first == name; });
  };
  RINGLET_CHECK(!taken(parameters_) && !taken(buffers_) && !taken(children_), ValueError,
                type_name(), ": member name '", name, "' is already registered");
}

Tensor Module::register_parameter(const std::string& name, Tensor value) {
  check_new_name(name);
  RINGLET_CHECK(value.defined() && value.is_leaf(), ValueError, type_name(), ": parameter '", name,
                "' must be a defined leaf tensor");
  value.requires_grad_(true);
  parameters_.emplace_back(name, value);
  return value;
}

Tensor Module::register_buffer(const std::string& name, Tensor value) {
  check_new_name(name);
  RINGLET_CHECK(value.defined(), ValueError, type_name(), ": buffer '", name,
                "' must be a defined tensor");
  buffers_.emplace_back(name, value);
  return value;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> child) {
  check_new_name(name);
  RINGLET_CHECK(child != nullptr, ValueError, type_name(), ": child '", name, "' is null");
  children_.emplace_back(name, std::move(child));
}

// --- traversal ---

void Module::collect(const std::string& prefix, bool params, bool buffers,
                     std::vector<std::pair<std::string, Tensor>>& out) const {
  if (params) {
    for (const auto& [name, t] : parameters_) out.emplace_back(prefix + name, t);
  }
  if (buffers) {
    for (const auto& [name, t] : buffers_) out.emplace_back(prefix + name, t);
  }
  for (const auto& [name, child] : children_)
    child->collect(prefix + name + ".", params, buffers, out);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", true, false, out);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", false, true, out);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  std::set<const tensor::TensorImpl*> seen;
  for (const auto& [name, t] : named_parameters()) {
    if (seen.insert(t.impl_ptr().get()).second) out.push_back(t);
  }
  return out;
}

std::vector<std::pair<std::string, const Module*>> Module::named_modules() const {
  std::vector<std::pair<std::string, const Module*>> out;
  // Explicit stack, children pushed in reverse so they pop in registration order.
  std::vector<std::pair<std::string, const Module*>> stack{{"", this}};
  while (!stack.empty()) {
    auto [name, module] = stack.back();
    stack.pop_back();
    out.emplace_back(name, module);
    const auto& kids = module->children_;
    for (auto it = kids.rbegin(); it != kids.rend(); ++it) {
      stack.emplace_back(name.empty() ? it->first : name + "." + it->first, it->second.get());
    }
  }
  return out;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

std::int64_t Module::num_parameters() const {
  std::int64_t total = 0;
  for (const auto& p : parameters()) total += p.numel();
  return total;
}

void Module::zero_grad() {
  for (const auto& p : parameters()) p.set_grad(Tensor());
}

void Module::to(core::Device device) {
  std::vector<std::pair<std::string, Tensor>> all;
  collect("", true, true, all);
  for (auto& [name, t] : all) {
    if (t.device() == device) continue;
    const Tensor moved = t.detach().to(device);
    tensor::TensorImpl& impl = t.impl();
    impl.storage = moved.storage();
    impl.strides = moved.strides();
    impl.offset = moved.offset();
    impl.grad = nullptr;
  }
}

// --- state ---

StateDict Module::state_dict() const {
  std::vector<std::pair<std::string, Tensor>> entries;
  collect("", true, true, entries);
  StateDict dict;
  for (auto& [name, t] : entries) dict.insert(name, t.detach());
  return dict;
}

LoadResult Module::load_state_dict(const StateDict& dict, bool strict) {
  std::vector<std::pair<std::string, Tensor>> targets;
  collect("", true, true, targets);

  LoadResult result;
  std::vector<std::string> mismatches;
  std::set<std::string> known;
  for (const auto& [name, target] : targets) {
    known.insert(name);
    if (!dict.contains(name)) {
      result.missing_keys.push_back(name);
      continue;
    }
    const Tensor& value = dict.at(name);
    if (!value.defined() || value.shape() != target.shape()) {
      mismatches.push_back(core::str(
          name, ": shape ", value.defined() ? tensor::shape_str(value.shape()) : "(undefined)",
          " in the state dict, ", tensor::shape_str(target.shape()), " in the model"));
    }
  }
  for (const auto& [name, value] : dict) {
    if (!known.count(name)) result.unexpected_keys.push_back(name);
  }

  const bool key_errors =
      strict && (!result.missing_keys.empty() || !result.unexpected_keys.empty());
  if (key_errors || !mismatches.empty()) {
    std::ostringstream msg;
    msg << "load_state_dict: error(s) loading a state dict into " << type_name() << ":";
    auto list = [&](const char* title, const std::vector<std::string>& names) {
      if (names.empty()) return;
      msg << "\n  " << title << " (" << names.size() << "):";
      for (const auto& n : names) msg << " \"" << n << "\"";
    };
    if (strict) {
      list("missing keys", result.missing_keys);
      list("unexpected keys", result.unexpected_keys);
    }
    if (!mismatches.empty()) {
      msg << "\n  shape mismatches (" << mismatches.size() << "):";
      for (const auto& m : mismatches) msg << "\n    " << m;
    }
    throw StateDictError(msg.str());
  }

  // Parameters are leaves that require grad: the copy must not be recorded.
  tensor::NoGradGuard no_grad;
  for (auto& [name, target] : targets) {
    if (dict.contains(name)) tensor::copy_(target, dict.at(name));
  }
  return result;
}

// --- summary ---

std::string Module::summary() const {
  struct Row {
    std::string label;
    std::int64_t params;
  };
  std::vector<Row> rows;
  std::size_t width = 6;  // "module"
  for (const auto& [name, module] : named_modules()) {
    const std::size_t depth =
        name.empty() ? 0 : 1 + static_cast<std::size_t>(std::count(name.begin(), name.end(), '.'));
    std::string label(2 * depth, ' ');
    if (!name.empty()) label.append("(").append(name.substr(name.rfind('.') + 1)).append(") ");
    label += module->type_name();
    const std::string extra = module->extra_repr();
    if (!extra.empty()) label.append("(").append(extra).append(")");
    width = std::max(width, label.size());
    rows.push_back({std::move(label), module->num_parameters()});
  }
  const std::string total = format_count(num_parameters());
  const std::size_t count_width = std::max<std::size_t>(total.size(), 6);  // "params"
  std::ostringstream out;
  auto line = [&](const std::string& left, const std::string& right) {
    out << left << std::string(width - left.size() + 2 + count_width - right.size(), ' ') << right
        << '\n';
  };
  line("module", "params");
  for (const auto& row : rows) line(row.label, format_count(row.params));
  out << "total parameters: " << total << '\n';
  return out.str();
}

}  // namespace ringlet::nn
