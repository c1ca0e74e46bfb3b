// Inverted dropout: zeroes elements with probability p and scales survivors by 1/(1-p) in
// training; identity in eval. The mask comes from the caller's Generator.
#pragma once

#include "tensor/generator.h"
#include "tensor/tensor.h"

namespace ringlet::tensor {

Tensor dropout(const Tensor& input, double p, bool training, Generator& gen);

}  // namespace ringlet::tensor
