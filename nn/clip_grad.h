// Gradient clipping by global norm, as torch.nn.utils.clip_grad_norm_ (PyTorch 1.13): the
// norm of the per-parameter gradient norms; when it exceeds max_norm every gradient is scaled
// by max_norm / (total_norm + 1e-6). Gradients are modified in place.
#pragma once

#include <limits>
#include <vector>

#include "tensor/tensor.h"

namespace ringlet::nn {

// Returns the total norm of the gradients of `params` (those without a gradient are skipped;
// 0 when none has one). norm_type is p > 0 or infinity (max |g|). The norm and the scale are
// computed in the gradients' dtype (all gradients must share it, f32 or f64, on the host);
// sums accumulate in double. error_if_nonfinite throws ValueError on a NaN/inf total norm
// instead of scaling by it.
double clip_grad_norm_(const std::vector<tensor::Tensor>& params, double max_norm,
                       double norm_type = 2.0, bool error_if_nonfinite = false);
// The total norm clip_grad_norm_ returns, computed the same way, the gradients left alone.
double grad_norm(const std::vector<tensor::Tensor>& params, double norm_type = 2.0);

}  // namespace ringlet::nn
