// Parameter initializers as torch.nn.init computes them, drawing from an explicit
// tensor::Generator (there is no global RNG). The Generator draws what PyTorch's does, so a
// model built with Generator(s) has the weights PyTorch builds after torch.manual_seed(s). All fill
// a tensor in place without recording autograd history, so they work on parameters that require
// grad. PyTorch's defaults: Linear and Conv2d weights kaiming_uniform_(a = sqrt(5)), which is
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)); biases U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
#pragma once

#include <cstdint>
#include <string>

#include "tensor/generator.h"
#include "tensor/tensor.h"

namespace ringlet::nn::init {

using tensor::Generator;
using tensor::Tensor;

struct Fans {
  std::int64_t fan_in = 0;   // size(1) * receptive field
  std::int64_t fan_out = 0;  // size(0) * receptive field
};
// torch.nn.init._calculate_fan_in_and_fan_out: needs at least 2 dims.
Fans fans(const Tensor& weight);

// torch.nn.init.calculate_gain for "linear", "conv2d", "sigmoid", "tanh", "relu" and
// "leaky_relu" (param = negative slope, default 0.01).
double calculate_gain(const std::string& nonlinearity, double param = 0.01);

void uniform_(Tensor& t, double low, double high, Generator& gen);
void normal_(Tensor& t, double mean, double std, Generator& gen);
void constant_(Tensor& t, double value);
void zeros_(Tensor& t);
void ones_(Tensor& t);

// mode: "fan_in" or "fan_out"; nonlinearity "leaky_relu" uses `a` as its slope.
void kaiming_uniform_(Tensor& t, Generator& gen, double a = 0.0, const std::string& mode = "fan_in",
                      const std::string& nonlinearity = "leaky_relu");
void kaiming_normal_(Tensor& t, Generator& gen, double a = 0.0, const std::string& mode = "fan_in",
                     const std::string& nonlinearity = "leaky_relu");

// PyTorch's reset_parameters() of Linear / Conv2d: weight kaiming_uniform_(a = sqrt(5)), then
// bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)) when defined (in that order, as PyTorch draws them).
void default_weight_and_bias_(Tensor& weight, Tensor& bias, Generator& gen);

}  // namespace ringlet::nn::init
