// An epilogue's activation (tensor/activation.h) applied to one value, on the host and in device
// kernels. ReLU as PyTorch's: max(x, 0), NaN stays NaN.
#pragma once

#include "tensor/activation.h"
#include "tensor/kernels/hd.h"

namespace ringlet::tensor {
namespace kernels {

template <class T>
RINGLET_HD T activate(T x, Activation act) {
  if (act == Activation::relu) return x > T(0) || x != x ? x : T(0);
  return x;
}

}  // namespace kernels

}  // namespace ringlet::tensor
