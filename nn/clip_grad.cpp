// clip_grad_norm_: per-parameter norms reduced with a double accumulator and rounded to the
// gradient dtype (PyTorch reduces each tensor's norm, then the norm of the stacked norms), then
// PyTorch's coefficient min(max_norm / (total + 1e-6), 1) in that dtype, applied in place.
#include "nn/clip_grad.h"

#include <algorithm>
#include <cmath>

#include "tensor/ops.h"

namespace ringlet::nn {

using tensor::Tensor;

namespace {

// Norm of n values in double; p = inf gives max |x|.
template <class T>
double norm_of(const T* x, std::int64_t n, double p) {
  if (std::isinf(p)) {
    double m = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const double a = std::abs(static_cast<double>(x[i]));
      m = (a > m || std::isnan(a)) ? a : m;
    }
    return m;
  }
  double acc = 0;
  if (p == 2) {
    for (std::int64_t i = 0; i < n; ++i) acc += static_cast<double>(x[i]) * x[i];
    return std::sqrt(acc);
  }
  if (p == 1) {
    for (std::int64_t i = 0; i < n; ++i) acc += std::abs(static_cast<double>(x[i]));
    return acc;
  }
  for (std::int64_t i = 0; i < n; ++i) acc += std::pow(std::abs(static_cast<double>(x[i])), p);
  return std::pow(acc, 1.0 / p);
}

// A device gradient's norm accumulated in device ops, in f64 and in the same order as norm_of,
// as a one-element device tensor (the p-th root is taken on the host, by finish_norm).
Tensor device_norm_sum(const Tensor& g, double p) {
  const Tensor x = tensor::abs(g.to(core::DType::f64));
  if (std::isinf(p)) {
    if (x.numel() == 0) return tensor::zeros({1}, core::DType::f64, g.device());
    return tensor::max(x.reshape({x.numel()}), 0).first.reshape({1});
  }
  if (p == 2) return tensor::sum(tensor::mul(x, x)).reshape({1});
  if (p == 1) return tensor::sum(x).reshape({1});
  return tensor::sum(tensor::pow(x, p)).reshape({1});
}

double finish_norm(double sum, double p) {
  if (std::isinf(p) || p == 1) return sum;
  if (p == 2) return std::sqrt(sum);
  return std::pow(sum, 1.0 / p);
}

// Each parameter's norm is rounded to T, as PyTorch's per-tensor norms are, then their norm.
// The device gradients' sums come back in one read (one host synchronization).
template <class T>
T total_norm(const std::vector<Tensor>& grads, double p) {
  std::vector<Tensor> on_device;
  for (const Tensor& g : grads) {
    if (!g.device().is_cpu()) on_device.push_back(device_norm_sum(g, p));
  }
  const std::vector<double> sums =
      on_device.empty() ? std::vector<double>() : tensor::cat(on_device, 0).to_vector<double>();
  std::vector<T> norms;
  norms.reserve(grads.size());
  std::size_t next = 0;
  for (const Tensor& g : grads) {
    norms.push_back(static_cast<T>(g.device().is_cpu() ? norm_of(g.data<T>(), g.numel(), p)
                                                       : finish_norm(sums[next++], p)));
  }
  return static_cast<T>(norm_of(norms.data(), static_cast<std::int64_t>(norms.size()), p));
}

template <class T>
double clip(const std::vector<Tensor>& grads, double max_norm, double p, bool error_if_nonfinite) {
  const T total = total_norm<T>(grads, p);
  RINGLET_CHECK(!error_if_nonfinite || std::isfinite(total), ValueError,
                "clip_grad_norm_: the total norm of order ", p, " of the gradients is ", total,
                "; gradients cannot be clipped");
  T coef = static_cast<T>(max_norm) / (total + static_cast<T>(1e-6));
  coef = coef < T(1) ? coef : T(1);  // torch.clamp(max=1.0); NaN stays NaN
  for (const Tensor& g : grads) {
    if (!g.device().is_cpu()) {
      Tensor target = g;
      tensor::mul_(target, static_cast<double>(coef));  // the coefficient rounded to T first
      continue;
    }
    T* x = g.data<T>();
    for (std::int64_t i = 0, n = g.numel(); i < n; ++i) x[i] = x[i] * coef;
  }
  return static_cast<double>(total);
}

// The parameters' gradients (those without one skipped): f32 or f64, one dtype, contiguous.
std::vector<Tensor> gradients_of(const std::vector<Tensor>& params, const char* op) {
  std::vector<Tensor> grads;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Tensor g = params[i].grad();
    if (!g.defined()) continue;
    RINGLET_CHECK(g.dtype() == core::DType::f32 || g.dtype() == core::DType::f64, DTypeError, op,
                  ": the gradient of parameter ", i, " has dtype ", g.dtype(),
                  "; expected f32 or f64");
    RINGLET_CHECK(grads.empty() || g.dtype() == grads.front().dtype(), DTypeError, op,
                  ": gradients mix dtypes (", grads.front().dtype(), " and ", g.dtype(),
                  " at parameter ", i, ")");
    RINGLET_CHECK(g.is_contiguous(), ValueError, op, ": the gradient of parameter ", i,
                  " is not contiguous");
    grads.push_back(g);
  }
  return grads;
}

}  // namespace

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  RINGLET_CHECK(norm_type > 0, ValueError, "clip_grad_norm_: norm_type must be > 0, got ",
                norm_type);
  RINGLET_CHECK(!std::isnan(max_norm), ValueError, "clip_grad_norm_: max_norm is NaN");
  std::vector<Tensor> grads = gradients_of(params, "clip_grad_norm_");
  if (grads.empty()) return 0.0;
  tensor::NoGradGuard no_grad;
  if (grads.front().dtype() == core::DType::f32) {
    return clip<float>(grads, max_norm, norm_type, error_if_nonfinite);
  }
  return clip<double>(grads, max_norm, norm_type, error_if_nonfinite);
}

double grad_norm(const std::vector<Tensor>& params, double norm_type) {
  RINGLET_CHECK(norm_type > 0, ValueError, "grad_norm: norm_type must be > 0, got ", norm_type);
  const std::vector<Tensor> grads = gradients_of(params, "grad_norm");
  if (grads.empty()) return 0.0;
  tensor::NoGradGuard no_grad;
  if (grads.front().dtype() == core::DType::f32) return total_norm<float>(grads, norm_type);
  return total_norm<double>(grads, norm_type);
}

}  // namespace ringlet::nn
