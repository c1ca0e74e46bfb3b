// Pooling modules as torch.nn's: MaxPool2d and AvgPool2d (stride defaults to the kernel,
// floor output size, zero padding counted in the average), and AdaptiveAvgPool2d for output
// sizes that divide the input (every case ResNets need, e.g. (1, 1)); a non-divisible size
// is a ValueError naming both sizes.
#pragma once

#include <optional>

#include "nn/module.h"

namespace ringlet::nn {

class MaxPool2d : public Module {
 public:
  // stride nullopt = kernel_size, as PyTorch.
  explicit MaxPool2d(Size2 kernel_size, std::optional<Size2> stride = std::nullopt,
                     Size2 padding = 0);
  Tensor forward(const Tensor& input) override;
  // forward(relu(input)) with the same values and gradients, in one pass where the op can
  // (tensor::relu_max_pool2d): Sequential runs a ReLU followed by this so.
  Tensor forward_after_relu(const Tensor& input);
  std::string type_name() const override { return "MaxPool2d"; }
  std::string extra_repr() const override;

 private:
  Size2 kernel_, stride_, padding_;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(Size2 kernel_size, std::optional<Size2> stride = std::nullopt,
                     Size2 padding = 0);
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "AvgPool2d"; }
  std::string extra_repr() const override;

 private:
  Size2 kernel_, stride_, padding_;
};

class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(Size2 output_size) : output_(output_size) {}
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "AdaptiveAvgPool2d"; }
  std::string extra_repr() const override;

 private:
  Size2 output_;
};

}  // namespace ringlet::nn
