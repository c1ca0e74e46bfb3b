// Flatten over tensor::flatten: a view when the input's strides allow, else a copy.
#include "nn/flatten.h"

#include "tensor/ops/movement.h"

namespace ringlet::nn {

Tensor Flatten::forward(const Tensor& input) {
  return tensor::flatten(input, start_dim_, end_dim_);
}

std::string Flatten::extra_repr() const {
  return core::str("start_dim=", start_dim_, ", end_dim=", end_dim_);
}

}  // namespace ringlet::nn
