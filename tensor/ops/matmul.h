// Matrix products through OpenBLAS (sgemm/dgemm). matmul follows torch.matmul: 1-D operands
// are promoted and the added dim removed; batch dims broadcast. Transposed operands are passed
// to GEMM as transposes, not copied.
#pragma once

#include "tensor/activation.h"
#include "tensor/tensor.h"

namespace ringlet::tensor {

Tensor matmul(const Tensor& a, const Tensor& b);
// x [..., in] @ weight [out, in]^T + bias [out] (bias may be undefined).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});
// ... then `act` (relu: relu(linear(...)); on a device the bias and the ReLU are one kernel).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, Activation act);

}  // namespace ringlet::tensor
