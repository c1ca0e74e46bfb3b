// Batch normalization over [N, C] or [N, C, H, W] (statistics per channel C).
// Training: normalizes with the batch mean and biased variance, and updates running_mean /
// running_var in place (momentum, unbiased variance) when they are defined.
// Eval: normalizes with the running statistics.
// Synchronized (SyncBatchNorm): with a `reducer` that sums a vector elementwise across the
// ranks of a job, training uses the statistics of the global batch (sums of x, of squared
// deviations and the count are reduced) and the backward reduces sum(dy) and sum(dy * xhat);
// the weight and bias gradients stay local sums, as PyTorch's (DDP then averages them). On a
// device the sums are taken there and copied to the host for the reducer.
#pragma once

#include <functional>
#include <vector>

#include "tensor/activation.h"
#include "tensor/tensor.h"

namespace ringlet::tensor {

// Sums `values` elementwise across ranks, in place; every rank calls it in the same order.
using StatsReducer = std::function<void(std::vector<double>& values)>;

Tensor batch_norm(const Tensor& input, Tensor running_mean, Tensor running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum = 0.1,
                  double eps = 1e-5, const StatsReducer& reducer = {});
// ... then `act` (relu: relu(batch_norm(...)); on a device the normalization and the ReLU are
// one kernel).
Tensor batch_norm(const Tensor& input, Tensor running_mean, Tensor running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps, const StatsReducer& reducer, Activation act);

}  // namespace ringlet::tensor
