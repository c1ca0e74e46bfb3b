// 2-D convolution (cross-correlation, as PyTorch) through im2col + one GEMM per batch.
#pragma once

#include <array>

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

}  // namespace ringlet::tensor
