// Reductions over dims (negative dims allowed; an empty dim list reduces everything) and the
// softmax family. max/min over a dim return values and i64 indices; gradients flow to the
// selected element. Full max()/min() split the gradient evenly between ties (as PyTorch).
#pragma once

#include <utility>

#include "tensor/tensor.h"

namespace ringlet::tensor {

Tensor sum(const Tensor& t, const Shape& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& t, const Shape& dims = {}, bool keepdim = false);
// Variance with Bessel's correction when unbiased (PyTorch's default).
Tensor var(const Tensor& t, const Shape& dims = {}, bool unbiased = true, bool keepdim = false);
Tensor max(const Tensor& t);  // 0-d
Tensor min(const Tensor& t);
std::pair<Tensor, Tensor> max(const Tensor& t, std::int64_t dim, bool keepdim = false);
std::pair<Tensor, Tensor> min(const Tensor& t, std::int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& t, std::int64_t dim, bool keepdim = false);  // i64
Tensor softmax(const Tensor& t, std::int64_t dim);
Tensor log_softmax(const Tensor& t, std::int64_t dim);

}  // namespace ringlet::tensor
