// 2-D convolution (cross-correlation, as PyTorch) through im2col + GEMMs; on a device the whole
// batch at once, or the CPU's decomposition when deterministic (tensor/determinism.h).
#pragma once

#include <array>

#include "tensor/activation.h"
#include "tensor/tensor.h"

namespace ringlet::tensor {

struct Conv2dOptions {
  std::array<std::int64_t, 2> stride{1, 1};
  std::array<std::int64_t, 2> padding{0, 0};
  std::array<std::int64_t, 2> dilation{1, 1};
};

// input [N, C, H, W], weight [O, C, kH, kW], bias [O] or undefined -> [N, O, oH, oW].
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
              const Conv2dOptions& options = {});
// ... then `act` (relu: relu(conv2d(...)), with the bias and the ReLU as one kernel on a device).
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias,
              const Conv2dOptions& options, kernels::Activation act);

}  // namespace ringlet::tensor
