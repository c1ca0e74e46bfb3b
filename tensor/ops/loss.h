// Classification losses. cross_entropy fuses log_softmax and nll for stability and speed.
// logits [N, C], target i64 [N] with values in [0, C) (checked).
#pragma once

#include "tensor/tensor.h"

namespace ringlet::tensor {

enum class Reduction { mean, sum, none };

Tensor cross_entropy(const Tensor& logits, const Tensor& target,
                     Reduction reduction = Reduction::mean, double label_smoothing = 0.0);
Tensor nll_loss(const Tensor& log_probs, const Tensor& target,
                Reduction reduction = Reduction::mean);
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean);

}  // namespace ringlet::tensor
