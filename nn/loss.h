// Loss modules over the tensor layer's fused losses. They take (input, target), so they are
// callables rather than Modules (a Module's forward has one input); they hold no state.
#pragma once

#include "tensor/ops/loss.h"
#include "tensor/tensor.h"

namespace ringlet::nn {

using tensor::Reduction;
using tensor::Tensor;

// torch.nn.CrossEntropyLoss: logits [N, C], i64 targets [N] in [0, C). With label smoothing
// e, the target distribution is (1 - e) one-hot + e / C, as PyTorch.
class CrossEntropyLoss {
 public:
  explicit CrossEntropyLoss(Reduction reduction = Reduction::mean, double label_smoothing = 0.0);
  Tensor forward(const Tensor& logits, const Tensor& target) const;
  Tensor operator()(const Tensor& logits, const Tensor& target) const {
    return forward(logits, target);
  }
  Reduction reduction() const { return reduction_; }
  double label_smoothing() const { return label_smoothing_; }

 private:
  Reduction reduction_;
  double label_smoothing_;
};

// torch.nn.MSELoss: (input - target)^2, same shapes, reduced.
class MSELoss {
 public:
  explicit MSELoss(Reduction reduction = Reduction::mean) : reduction_(reduction) {}
  Tensor forward(const Tensor& input, const Tensor& target) const;
  Tensor operator()(const Tensor& input, const Tensor& target) const {
    return forward(input, target);
  }
  Reduction reduction() const { return reduction_; }

 private:
  Reduction reduction_;
};

}  // namespace ringlet::nn
