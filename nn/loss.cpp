// Loss modules: argument checks here, the math (fused log-softmax + NLL, smoothing) in
// tensor/ops/loss.cpp.
#include "nn/loss.h"

#include "core/error.h"

namespace ringlet::nn {

CrossEntropyLoss::CrossEntropyLoss(Reduction reduction, double label_smoothing)
    : reduction_(reduction), label_smoothing_(label_smoothing) {
  RINGLET_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0, ValueError,
                "CrossEntropyLoss: label_smoothing must be in [0, 1], got ", label_smoothing);
}

Tensor CrossEntropyLoss::forward(const Tensor& logits, const Tensor& target) const {
  return tensor::cross_entropy(logits, target, reduction_, label_smoothing_);
}

Tensor MSELoss::forward(const Tensor& input, const Tensor& target) const {
  return tensor::mse_loss(input, target, reduction_);
}

}  // namespace ringlet::nn
