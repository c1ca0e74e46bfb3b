#include "trainer/finite_state.h"

#include <cmath>

#include "core/dtype.h"

namespace ringlet::trainer {
namespace {

bool all_finite(const tensor::Tensor& t) {
  if (!core::is_floating(t.dtype())) return true;
  for (const double v : t.to(core::Device::cpu()).to_vector<double>()) {
    if (!std::isfinite(v)) return false;
  }
  return true;
}

}  // namespace

std::string first_non_finite(const nn::Module& model) {
  for (const auto& [name, p] : model.named_parameters()) {
    if (!all_finite(p)) return name;
  }
  for (const auto& [name, b] : model.named_buffers()) {
    if (!all_finite(b)) return name;
  }
  return "";
}

std::string first_non_finite(const nn::Optimizer& optimizer) {
  for (const auto& [key, value] : optimizer.state_dict()) {
    const auto* t = std::get_if<tensor::Tensor>(&value);
    const bool finite = t != nullptr ? all_finite(*t) : std::isfinite(std::get<double>(value));
    if (!finite) return "optimizer state '" + key + "'";
  }
  return "";
}

}  // namespace ringlet::trainer
