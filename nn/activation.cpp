// ReLU over tensor::relu (out of place: in-place activations would overwrite values that
// the previous op's backward may have saved).
#include "nn/activation.h"

#include "tensor/ops/elementwise.h"

namespace ringlet::nn {

Tensor ReLU::forward(const Tensor& input) { return tensor::relu(input); }

}  // namespace ringlet::nn
