// BatchNorm2d over tensor::batch_norm, which updates the running statistics in place; this
// module counts batches (num_batches_tracked) and picks the momentum, as PyTorch's _BatchNorm.
#include "nn/batch_norm.h"

#include <sstream>

#include "tensor/autograd.h"
#include "tensor/ops/creation.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/norm.h"

namespace ringlet::nn {

BatchNorm2d::BatchNorm2d(std::int64_t num_features, const BatchNormOptions& options)
    : num_features_(num_features), options_(options) {
  RINGLET_CHECK(num_features > 0, ValueError, "BatchNorm2d: num_features must be positive, got ",
                num_features);
  if (options.affine) {
    weight_ = register_parameter("weight", tensor::ones({num_features}));
    bias_ = register_parameter("bias", tensor::zeros({num_features}));
  }
  if (options.track_running_stats) {
    running_mean_ = register_buffer("running_mean", tensor::zeros({num_features}));
    running_var_ = register_buffer("running_var", tensor::ones({num_features}));
    num_batches_tracked_ =
        register_buffer("num_batches_tracked", tensor::zeros({}, tensor::DType::i64));
  }
}

Tensor BatchNorm2d::forward(const Tensor& input) {
  return forward(input, tensor::Activation::none);
}

Tensor BatchNorm2d::forward(const Tensor& input, tensor::Activation act) {
  RINGLET_CHECK(input.dim() == 4 && input.size(1) == num_features_, ShapeError, "BatchNorm2d(",
                num_features_, "): input must be [N, ", num_features_, ", H, W], got ",
                tensor::shape_str(input.shape()));
  const bool tracking = options_.track_running_stats;
  const bool use_batch_stats = is_training() || !tracking;
  double momentum = options_.momentum.value_or(0.0);
  if (is_training() && tracking) {
    tensor::NoGradGuard no_grad;
    tensor::add_(num_batches_tracked_, 1.0);
    if (!options_.momentum) momentum = 1.0 / num_batches_tracked_.item();
  }
  // Running statistics are passed only when they are to be updated (training) or used (eval).
  const Tensor rm = tracking ? running_mean_ : Tensor();
  const Tensor rv = tracking ? running_var_ : Tensor();
  return tensor::batch_norm(input, rm, rv, weight_, bias_, use_batch_stats, momentum, options_.eps,
                            reducer_, act);
}

std::string BatchNorm2d::extra_repr() const {
  std::ostringstream s;
  s << num_features_ << ", eps=" << options_.eps << ", momentum=";
  if (options_.momentum) {
    s << *options_.momentum;
  } else {
    s << "None";
  }
  s << ", affine=" << (options_.affine ? "True" : "False")
    << ", track_running_stats=" << (options_.track_running_stats ? "True" : "False");
  return s.str();
}

}  // namespace ringlet::nn
