// The flat loops (tensor/cpu/flat_loops.h) applied to tensors. Each runs when out and every
// input are contiguous with out's shape (no broadcast, no scalar operand) and there is a loop
// for the op and dtype, split over core::parallel_for, and returns true; otherwise it returns
// false and the caller's generic kernel runs. CPU tensors only.
#pragma once

#include "tensor/kernels/elementwise.h"
#include "tensor/tensor.h"

namespace ringlet::tensor::cpu {

// out = a op b (add sub mul div maximum minimum; f32, f64; a and b of out's dtype).
bool flat_binary(kernels::BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b);
// out = relu(x); out = x > 0 ? g : 0 (f32, f64).
bool flat_relu(const Tensor& out, const Tensor& x);
bool flat_relu_grad(const Tensor& out, const Tensor& g, const Tensor& x);
// out = x converted, between f32 and f16 or bf16 (either way).
bool flat_cast(const Tensor& out, const Tensor& x);

}  // namespace ringlet::tensor::cpu
