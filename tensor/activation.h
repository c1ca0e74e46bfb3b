// The activation an op may apply to its output in the same kernel (an epilogue): a
// convolution's or a linear layer's after the bias, batch norm's after the normalization.
// ReLU as PyTorch's: max(x, 0), NaN stays NaN (tensor/kernels/activation.h applies it).
#pragma once

#include <cstdint>

namespace ringlet::tensor {
namespace kernels {

enum class Activation : std::uint8_t { none, relu };

}  // namespace kernels

using kernels::Activation;

}  // namespace ringlet::tensor
