// Views and data movement. Views share storage and rewrite shape/strides/offset only;
// contiguous() and clone() copy. Backward rules: reshape/view -> reshape back, permute ->
// inverse permutation, narrow -> pad with zeros, expand -> sum over broadcast axes.
#pragma once

#include "tensor/tensor.h"

namespace ringlet::tensor {

Tensor view(const Tensor& t, Shape shape);     // -1 infers one dim; needs compatible strides
Tensor reshape(const Tensor& t, Shape shape);  // view when possible, else a copy
Tensor flatten(const Tensor& t, std::int64_t start_dim = 0, std::int64_t end_dim = -1);
Tensor permute(const Tensor& t, const Shape& dims);
Tensor transpose(const Tensor& t, std::int64_t dim0, std::int64_t dim1);
// Elements [start, start + length) along dim.
Tensor narrow(const Tensor& t, std::int64_t dim, std::int64_t start, std::int64_t length);
// Python-style t[..., start:end:step, ...] along dim (step > 0; bounds clamped).
Tensor slice(const Tensor& t, std::int64_t dim, std::int64_t start, std::int64_t end,
             std::int64_t step = 1);
Tensor select(const Tensor& t, std::int64_t dim, std::int64_t index);  // drops dim
Tensor expand(const Tensor& t, const Shape& shape);  // -1 keeps a dim; size-1 dims broadcast
Tensor squeeze(const Tensor& t);                     // all size-1 dims
Tensor squeeze(const Tensor& t, std::int64_t dim);
Tensor unsqueeze(const Tensor& t, std::int64_t dim);
Tensor contiguous(const Tensor& t);
Tensor clone(const Tensor& t);
// Concatenates along dim (shapes equal elsewhere).
Tensor cat(const std::vector<Tensor>& tensors, std::int64_t dim);

// Sums `grad` down to `shape` (the inverse of broadcasting) — used by backward rules.
Tensor sum_to(const Tensor& grad, const Shape& shape);
// The broadcast shape of a and b (NumPy rules), or a ShapeError naming op and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

}  // namespace ringlet::tensor
