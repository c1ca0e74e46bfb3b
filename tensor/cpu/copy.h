// Strided copy with dtype conversion: the one kernel behind contiguous(), clone(), to(dtype)
// and copy_(). dst and src must have the same shape (callers expand src first); both on CPU.
#pragma once

#include "tensor/tensor.h"

namespace ringlet::tensor::cpu {

void copy(const Tensor& dst, const Tensor& src);

}  // namespace ringlet::tensor::cpu
