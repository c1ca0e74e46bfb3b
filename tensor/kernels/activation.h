// The activation an op may apply to its output in the same kernel (an epilogue): a
// convolution's or a linear layer's after the bias, batch norm's after the normalization.
// ReLU as PyTorch's: max(x, 0), NaN stays NaN.
#pragma once

#include <cstdint>

#include "tensor/kernels/hd.h"

namespace ringlet::tensor {
namespace kernels {

enum class Activation : std::uint8_t { none, relu };

template <class T>
RINGLET_HD T activate(T x, Activation act) {
  if (act == Activation::relu) return x > T(0) || x != x ? x : T(0);
  return x;
}

}  // namespace kernels

using kernels::Activation;

}  // namespace ringlet::tensor
