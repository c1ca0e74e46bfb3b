// Pooling modules over tensor::max_pool2d / avg_pool2d. AdaptiveAvgPool2d with an output size
// that divides the input is an average pool with kernel = stride = input / output: PyTorch's
// adaptive windows [floor(i*H/oH), ceil((i+1)*H/oH)) are exactly those tiles then.
#include "nn/pooling.h"

#include "tensor/ops/pool.h"

namespace ringlet::nn {
namespace {

tensor::Pool2dOptions pool_options(const Size2& kernel, const Size2& stride, const Size2& padding) {
  tensor::Pool2dOptions o;
  o.kernel = {kernel.h, kernel.w};
  o.stride = {stride.h, stride.w};
  o.padding = {padding.h, padding.w};
  return o;
}

std::string pool_repr(const Size2& kernel, const Size2& stride, const Size2& padding) {
  return "kernel_size=" + kernel.str() + ", stride=" + stride.str() + ", padding=" + padding.str();
}

void check_input(const Tensor& input, const char* name) {
  RINGLET_CHECK(input.dim() == 4, ShapeError, name, ": input must be [N, C, H, W], got ",
                tensor::shape_str(input.shape()));
}

void check_sizes(const Size2& kernel, const Size2& stride, const Size2& padding, const char* name) {
  RINGLET_CHECK(kernel.h > 0 && kernel.w > 0 && stride.h > 0 && stride.w > 0, ValueError, name,
                ": kernel_size and stride must be positive, got ", kernel.str(), " and ",
                stride.str());
  RINGLET_CHECK(
      padding.h >= 0 && padding.w >= 0 && 2 * padding.h <= kernel.h && 2 * padding.w <= kernel.w,
      ValueError, name, ": padding ", padding.str(), " must be at most half the kernel size ",
      kernel.str());
}

}  // namespace

MaxPool2d::MaxPool2d(Size2 kernel_size, std::optional<Size2> stride, Size2 padding)
    : kernel_(kernel_size), stride_(stride.value_or(kernel_size)), padding_(padding) {
  check_sizes(kernel_, stride_, padding_, "MaxPool2d");
}

Tensor MaxPool2d::forward(const Tensor& input) {
  check_input(input, "MaxPool2d");
  return tensor::max_pool2d(input, pool_options(kernel_, stride_, padding_));
}

Tensor MaxPool2d::forward_after_relu(const Tensor& input) {
  check_input(input, "MaxPool2d");
  return tensor::relu_max_pool2d(input, pool_options(kernel_, stride_, padding_));
}

std::string MaxPool2d::extra_repr() const { return pool_repr(kernel_, stride_, padding_); }

AvgPool2d::AvgPool2d(Size2 kernel_size, std::optional<Size2> stride, Size2 padding)
    : kernel_(kernel_size), stride_(stride.value_or(kernel_size)), padding_(padding) {
  check_sizes(kernel_, stride_, padding_, "AvgPool2d");
}

Tensor AvgPool2d::forward(const Tensor& input) {
  check_input(input, "AvgPool2d");
  return tensor::avg_pool2d(input, pool_options(kernel_, stride_, padding_));
}

std::string AvgPool2d::extra_repr() const { return pool_repr(kernel_, stride_, padding_); }

Tensor AdaptiveAvgPool2d::forward(const Tensor& input) {
  check_input(input, "AdaptiveAvgPool2d");
  const std::int64_t h = input.size(2), w = input.size(3);
  RINGLET_CHECK(output_.h > 0 && output_.w > 0 && h % output_.h == 0 && w % output_.w == 0,
                ValueError, "AdaptiveAvgPool2d: output size ", output_.str(),
                " must divide the input size (", h, ", ", w, "); other sizes are not implemented");
  const Size2 kernel(h / output_.h, w / output_.w);
  return tensor::avg_pool2d(input, pool_options(kernel, kernel, 0));
}

std::string AdaptiveAvgPool2d::extra_repr() const { return "output_size=" + output_.str(); }

}  // namespace ringlet::nn
