// Initializers as torch.nn.init computes them: the bound / std formulas are PyTorch's
// (kaiming: std = gain / sqrt(fan), bound = sqrt(3) * std). Values are generated in a fresh
// tensor of the target's dtype and copied in under NoGradGuard.
#include "nn/init.h"

#include <cmath>

#include "core/error.h"
#include "tensor/autograd.h"
#include "tensor/ops/creation.h"
#include "tensor/ops/elementwise.h"

namespace ringlet::nn::init {
namespace {

void assign(Tensor& t, const Tensor& values) {
  tensor::NoGradGuard no_grad;
  tensor::copy_(t, values);
}

std::int64_t fan_for(const Tensor& t, const std::string& mode) {
  const Fans f = fans(t);
  if (mode == "fan_in") return f.fan_in;
  if (mode == "fan_out") return f.fan_out;
  RINGLET_THROW(ValueError, "kaiming init: mode must be 'fan_in' or 'fan_out', got '", mode, "'");
}

double kaiming_std(const Tensor& t, double a, const std::string& mode,
                   const std::string& nonlinearity) {
  const std::int64_t fan = fan_for(t, mode);
  RINGLET_CHECK(fan > 0, ValueError, "kaiming init: zero ", mode, " for shape ",
                tensor::shape_str(t.shape()));
  return calculate_gain(nonlinearity, a) / std::sqrt(static_cast<double>(fan));
}

}  // namespace

Fans fans(const Tensor& weight) {
  RINGLET_CHECK(weight.dim() >= 2, ValueError,
                "fan in and fan out need a tensor with at least 2 dims, got shape ",
                tensor::shape_str(weight.shape()));
  std::int64_t receptive = 1;
  for (std::int64_t d = 2; d < weight.dim(); ++d) receptive *= weight.size(d);
  return {weight.size(1) * receptive, weight.size(0) * receptive};
}

double calculate_gain(const std::string& nonlinearity, double param) {
  if (nonlinearity == "linear" || nonlinearity == "conv2d" || nonlinearity == "sigmoid") return 1.0;
  if (nonlinearity == "tanh") return 5.0 / 3.0;
  if (nonlinearity == "relu") return std::sqrt(2.0);
  if (nonlinearity == "leaky_relu") return std::sqrt(2.0 / (1.0 + param * param));
  RINGLET_THROW(ValueError, "calculate_gain: unsupported nonlinearity '", nonlinearity, "'");
}

void uniform_(Tensor& t, double low, double high, Generator& gen) {
  assign(t, tensor::uniform(t.shape(), low, high, gen, t.dtype()));
}

void normal_(Tensor& t, double mean, double std, Generator& gen) {
  assign(t, tensor::normal(t.shape(), mean, std, gen, t.dtype()));
}

void constant_(Tensor& t, double value) { assign(t, tensor::full(t.shape(), value, t.dtype())); }
void zeros_(Tensor& t) { constant_(t, 0.0); }
void ones_(Tensor& t) { constant_(t, 1.0); }

void kaiming_uniform_(Tensor& t, Generator& gen, double a, const std::string& mode,
                      const std::string& nonlinearity) {
  const double bound = std::sqrt(3.0) * kaiming_std(t, a, mode, nonlinearity);
  uniform_(t, -bound, bound, gen);
}

void kaiming_normal_(Tensor& t, Generator& gen, double a, const std::string& mode,
                     const std::string& nonlinearity) {
  normal_(t, 0.0, kaiming_std(t, a, mode, nonlinearity), gen);
}

void default_weight_and_bias_(Tensor& weight, Tensor& bias, Generator& gen) {
  kaiming_uniform_(weight, gen, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(fans(weight).fan_in));
    uniform_(bias, -bound, bound, gen);
  }
}

}  // namespace ringlet::nn::init
