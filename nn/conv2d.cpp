// Conv2d over tensor::conv2d (im2col + GEMM); the module only holds parameters and options.
#include "nn/conv2d.h"

#include "nn/autocast.h"
#include "nn/init.h"
#include "tensor/math_mode.h"
#include "tensor/ops/conv.h"
#include "tensor/ops/creation.h"

namespace ringlet::nn {

Conv2d::Conv2d(std::int64_t in_channels, std::int64_t out_channels, Size2 kernel_size,
               tensor::Generator& gen, const Conv2dOptions& options)
    : in_channels_(in_channels),
      out_channels_(out_channels),
      kernel_size_(kernel_size),
      options_(options) {
  RINGLET_CHECK(in_channels > 0 && out_channels > 0 && kernel_size.h > 0 && kernel_size.w > 0,
                ValueError,
                "Conv2d: channels and kernel size must be positive, got in_channels=", in_channels,
                " out_channels=", out_channels, " kernel_size=", kernel_size.str());
  Tensor w = tensor::empty({out_channels, in_channels, kernel_size.h, kernel_size.w});
  Tensor b = options.bias ? tensor::empty({out_channels}) : Tensor();
  init::default_weight_and_bias_(w, b, gen);
  weight_ = register_parameter("weight", w);
  if (options.bias) bias_ = register_parameter("bias", b);
}

Tensor Conv2d::forward(const Tensor& input) { return forward(input, tensor::Activation::none); }

Tensor Conv2d::forward(const Tensor& input, tensor::Activation act) {
  RINGLET_CHECK(input.dim() == 4 && input.size(1) == in_channels_, ShapeError, "Conv2d(",
                in_channels_, ", ", out_channels_, "): input must be [N, ", in_channels_,
                ", H, W], got ", tensor::shape_str(input.shape()));
  tensor::Conv2dOptions o;
  o.stride = {options_.stride.h, options_.stride.w};
  o.padding = {options_.padding.h, options_.padding.w};
  o.dilation = {options_.dilation.h, options_.dilation.w};
  if (autocast_precision() != core::DType::f32) {
    const tensor::TensorCoreScope half(true);  // the convolution's operands are half values
    return autocast(tensor::conv2d(autocast(input), autocast(weight_), autocast(bias_), o, act));
  }
  return tensor::conv2d(input, weight_, bias_, o, act);
}

std::string Conv2d::extra_repr() const {
  std::string s = core::str(in_channels_, ", ", out_channels_, ", kernel_size=", kernel_size_.str(),
                            ", stride=", options_.stride.str());
  if (options_.padding != Size2(0)) s += ", padding=" + options_.padding.str();
  if (options_.dilation != Size2(1)) s += ", dilation=" + options_.dilation.str();
  if (!options_.bias) s += ", bias=False";
  return s;
}

}  // namespace ringlet::nn
