// Batch normalization over [N, C] or [N, C, H, W] (statistics per channel C).
// Training: normalizes with the batch mean and biased variance, and updates running_mean /
// running_var in place (momentum, unbiased variance) when they are defined.
// Eval: normalizes with the running statistics.
#pragma once

#include "tensor/tensor.h"

namespace ringlet::tensor {

Tensor batch_norm(const Tensor& input, Tensor running_mean, Tensor running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum = 0.1,
                  double eps = 1e-5);

}  // namespace ringlet::tensor
