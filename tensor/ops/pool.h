// 2-D max and average pooling over [N, C, H, W] (floor output size, as PyTorch's default).
// Padding is implicit -inf (max) or zeros counted in the divisor (avg, count_include_pad).
#pragma once

#include <array>
#include <utility>

#include "tensor/tensor.h"

namespace ringlet::tensor {

struct Pool2dOptions {
  std::array<std::int64_t, 2> kernel{2, 2};
  std::array<std::int64_t, 2> stride{0, 0};  // 0 = same as kernel (PyTorch's default)
  std::array<std::int64_t, 2> padding{0, 0};
};

// Returns (values, indices); indices are i64 flat positions within each H*W plane.
std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input,
                                                  const Pool2dOptions& options);
Tensor max_pool2d(const Tensor& input, const Pool2dOptions& options);
// max_pool2d(relu(input)) with the same values and gradients, in one pass over the input and
// without relu's output where the CPU loop has it (f32 / f64, 2x2 windows, stride 2, no
// padding); elsewhere exactly those two ops.
Tensor relu_max_pool2d(const Tensor& input, const Pool2dOptions& options);
Tensor avg_pool2d(const Tensor& input, const Pool2dOptions& options);

}  // namespace ringlet::tensor
