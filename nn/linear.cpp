// Linear over tensor::linear (one GEMM with the transposed weight, no copy).
#include "nn/linear.h"

#include "nn/autocast.h"
#include "nn/init.h"
#include "tensor/math_mode.h"
#include "tensor/ops/creation.h"
#include "tensor/ops/matmul.h"

namespace ringlet::nn {

Linear::Linear(std::int64_t in_features, std::int64_t out_features, tensor::Generator& gen,
               bool bias)
    : in_features_(in_features), out_features_(out_features) {
  RINGLET_CHECK(in_features > 0 && out_features > 0, ValueError,
                "Linear: features must be positive, got in_features=", in_features,
                " out_features=", out_features);
  Tensor w = tensor::empty({out_features, in_features});
  Tensor b = bias ? tensor::empty({out_features}) : Tensor();
  init::default_weight_and_bias_(w, b, gen);
  weight_ = register_parameter("weight", w);
  if (bias) bias_ = register_parameter("bias", b);
}

Tensor Linear::forward(const Tensor& input) { return forward(input, tensor::Activation::none); }

Tensor Linear::forward(const Tensor& input, tensor::Activation act) {
  RINGLET_CHECK(input.dim() >= 1 && input.size(-1) == in_features_, ShapeError,
                "Linear(in_features=", in_features_, "): input shape ",
                tensor::shape_str(input.shape()), " does not end in ", in_features_);
  if (autocast_precision() != core::DType::f32) {
    const tensor::TensorCoreScope half(true);  // the GEMMs' operands are half values
    return autocast(tensor::linear(autocast(input), autocast(weight_), autocast(bias_), act));
  }
  return tensor::linear(input, weight_, bias_, act);
}

std::string Linear::extra_repr() const {
  return core::str("in_features=", in_features_, ", out_features=", out_features_,
                   ", bias=", bias_.defined() ? "True" : "False");
}

}  // namespace ringlet::nn
