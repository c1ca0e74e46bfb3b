// Conv2d as torch.nn.Conv2d (weight [out, in, kH, kW], bias [out]; zero padding, groups 1).
#pragma once

#include <cstdint>

#include "nn/module.h"
#include "tensor/activation.h"
#include "tensor/generator.h"

namespace ringlet::nn {

struct Conv2dOptions {
  Size2 stride = 1;
  Size2 padding = 0;
  Size2 dilation = 1;
  bool bias = true;
};

class Conv2d : public Module {
 public:
  // PyTorch's default init, drawn from `gen` (weight first, then bias).
  Conv2d(std::int64_t in_channels, std::int64_t out_channels, Size2 kernel_size,
         tensor::Generator& gen, const Conv2dOptions& options = {});

  Tensor forward(const Tensor& input) override;
  // ... then `act`: relu(forward(input)), the bias and the ReLU one kernel on a device.
  Tensor forward(const Tensor& input, tensor::Activation act);
  std::string type_name() const override { return "Conv2d"; }
  std::string extra_repr() const override;

  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }  // undefined without bias
  const Conv2dOptions& options() const { return options_; }

 private:
  std::int64_t in_channels_, out_channels_;
  Size2 kernel_size_;
  Conv2dOptions options_;
  Tensor weight_, bias_;
};

}  // namespace ringlet::nn
