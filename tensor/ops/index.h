// Indexing by i64 index tensors. gather picks along dim (index has input's rank);
// index_select takes whole slices. Out-of-range indices are errors naming the value.
#pragma once

#include "tensor/tensor.h"

namespace ringlet::tensor {

Tensor gather(const Tensor& input, std::int64_t dim, const Tensor& index);
Tensor index_select(const Tensor& input, std::int64_t dim, const Tensor& index);
// The elements of dim in reverse order, as torch.flip(input, [dim]) (a copy; its gradient
// flips back).
Tensor flip(const Tensor& input, std::int64_t dim);

}  // namespace ringlet::tensor
