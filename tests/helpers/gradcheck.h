// Finite-difference gradient check in f64. For a random cotangent v (seeded), compares the
// analytic vector-Jacobian product (backward of fn(inputs) with gradient v) against central
// differences of <v, fn(inputs)> for every element of every input that requires grad.
// Inputs may be non-contiguous views: elements are perturbed in place through their strides.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "tensor/ops.h"

namespace ringlet::testing {

using tensor::Tensor;

// Offset (in elements, from storage start) of the element with row-major position `linear`.
inline std::int64_t element_offset(const Tensor& t, std::int64_t linear) {
  std::int64_t offset = t.offset();
  for (std::int64_t d = t.dim() - 1; d >= 0; --d) {
    const std::int64_t extent = t.size(d);
    offset += (linear % extent) * t.stride(d);
    linear /= extent;
  }
  return offset;
}

inline double dot_with(const Tensor& out, const Tensor& v) {
  const auto a = out.to_vector<double>();
  const auto b = v.to_vector<double>();
  double total = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) total += a[i] * b[i];
  return total;
}

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-6;
  double rtol = 1e-5;
  std::uint64_t seed = 1234;
};

// Returns the number of mismatching elements (also reported through doctest CHECKs).
inline int gradcheck(const std::string& name,
                     const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                     const std::vector<Tensor>& inputs, const GradcheckOptions& opt = {}) {
  for (const auto& t : inputs) {
    if (t.defined() && t.requires_grad()) {
      REQUIRE_MESSAGE(t.dtype() == core::DType::f64, name, ": gradcheck inputs must be f64");
      t.set_grad(Tensor());
    }
  }
  Tensor out = fn(inputs);
  tensor::Generator gen(opt.seed);
  const Tensor v = tensor::randn(out.shape(), gen, core::DType::f64);
  REQUIRE_MESSAGE(out.requires_grad(), name, ": output does not require grad");
  out.backward(v);

  int mismatches = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    if (!x.defined() || !x.requires_grad()) continue;
    const Tensor grad = x.grad();
    std::vector<double> analytic =
        grad.defined() ? grad.to_vector<double>() : std::vector<double>(x.numel(), 0.0);
    double* base = static_cast<double*>(x.storage()->data());
    for (std::int64_t j = 0; j < x.numel(); ++j) {
      double& element = base[element_offset(x, j)];
      const double saved = element;
      double plus, minus;
      {
        tensor::NoGradGuard no_grad;
        element = saved + opt.eps;
        plus = dot_with(fn(inputs), v);
        element = saved - opt.eps;
        minus = dot_with(fn(inputs), v);
        element = saved;
      }
      const double numeric = (plus - minus) / (2 * opt.eps);
      const double diff = std::abs(numeric - analytic[j]);
      const bool ok = diff <= opt.atol + opt.rtol * std::abs(numeric);
      if (!ok) {
        ++mismatches;
        if (mismatches <= 5) {
          FAIL_CHECK(name, ": input ", i, " element ", j, " analytic ", analytic[j], " numeric ",
                     numeric);
        }
      }
    }
  }
  CHECK_MESSAGE(mismatches == 0, name, ": ", mismatches, " gradient elements differ");
  return mismatches;
}

// f64 input with values in [low, high), requiring grad.
inline Tensor make_input(const tensor::Shape& shape, std::uint64_t seed, double low = -1.0,
                         double high = 1.0) {
  tensor::Generator gen(seed);
  Tensor t = tensor::uniform(shape, low, high, gen, core::DType::f64);
  t.requires_grad_();
  return t;
}

}  // namespace ringlet::testing
