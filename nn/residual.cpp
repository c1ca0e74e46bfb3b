// BasicBlock: members are registered in torchvision's order (conv1, bn1, conv2, bn2,
// downsample) so that the state dict's keys and order match torchvision's BasicBlock.
#include "nn/residual.h"

#include "tensor/ops/elementwise.h"

namespace ringlet::nn {

BasicBlock::BasicBlock(std::int64_t in_channels, std::int64_t out_channels, std::int64_t stride,
                       tensor::Generator& gen)
    : in_channels_(in_channels), out_channels_(out_channels), stride_(stride) {
  RINGLET_CHECK(stride > 0, ValueError, "BasicBlock: stride must be positive, got ", stride);
  conv1_ = register_module(
      "conv1",
      std::make_shared<Conv2d>(in_channels, out_channels, 3, gen,
                               Conv2dOptions{.stride = stride, .padding = 1, .bias = false}));
  bn1_ = register_module("bn1", std::make_shared<BatchNorm2d>(out_channels));
  conv2_ = register_module(
      "conv2", std::make_shared<Conv2d>(out_channels, out_channels, 3, gen,
                                        Conv2dOptions{.stride = 1, .padding = 1, .bias = false}));
  bn2_ = register_module("bn2", std::make_shared<BatchNorm2d>(out_channels));
  if (stride != 1 || in_channels != out_channels) {
    downsample_ = register_module(
        "downsample", seq(std::make_shared<Conv2d>(in_channels, out_channels, 1, gen,
                                                   Conv2dOptions{.stride = stride, .bias = false}),
                          std::make_shared<BatchNorm2d>(out_channels)));
  }
}

Tensor BasicBlock::forward(const Tensor& input) {
  Tensor out = bn1_->forward(conv1_->forward(input), tensor::Activation::relu);
  out = bn2_->forward(conv2_->forward(out));
  const Tensor shortcut = downsample_ ? downsample_->forward(input) : input;
  return tensor::relu(tensor::add(out, shortcut));
}

std::string BasicBlock::extra_repr() const {
  return core::str(in_channels_, ", ", out_channels_, ", stride=", stride_);
}

}  // namespace ringlet::nn
