// conv2d's device half (conv_device.cpp), for conv.cpp: the CPU's rule for one GEMM over the
// batch, which the deterministic device path mirrors, and the device entry point.
#pragma once

#include <cstdint>

#include "tensor/cpu/im2col.h"
#include "tensor/kernels/nn.h"
#include "tensor/tensor.h"

namespace ringlet::tensor {

// Whether the CPU runs one GEMM over the whole batch (the products are deep enough to pay for
// the transposes) or one GEMM per image.
bool conv_batched_gemm(const cpu::ConvGeometry& g, std::int64_t batch);

// conv2d of validated operands on their device, with `act` applied to the output.
Tensor conv2d_device(const cpu::ConvGeometry& g, const Tensor& input, const Tensor& weight,
                     const Tensor& bias, kernels::Activation act);

}  // namespace ringlet::tensor
