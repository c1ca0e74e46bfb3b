// Elementwise ops with NumPy broadcasting. Binary ops need equal dtypes (no silent
// promotion: a DTypeError names both); a double scalar takes the tensor's dtype.
// In-place variants (trailing _) write into their first argument; they refuse to run on a
// tensor that requires grad while grad mode is on (autograd would lose the old values).
#pragma once

#include "tensor/tensor.h"

namespace ringlet::tensor {

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);  // a > 0 where b is not an integer
Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);
Tensor pow(const Tensor& a, double exponent);
Tensor maximum(const Tensor& a, const Tensor& b);  // grad to the larger (split on ties)
Tensor minimum(const Tensor& a, const Tensor& b);

Tensor neg(const Tensor& a);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor abs(const Tensor& a);   // grad sign(a), 0 at 0 (as PyTorch)
Tensor relu(const Tensor& a);  // grad 0 at 0 (as PyTorch)
// grad where relu's output is > 0, else 0: relu's backward from its output (fused ops keep only
// that).
Tensor relu_gradient(const Tensor& grad, const Tensor& relu_output);
Tensor sigmoid(const Tensor& a);
Tensor tanh(const Tensor& a);
// Clamps into [min, max]; grad 1 inside (bounds included, as PyTorch), 0 outside.
Tensor clamp(const Tensor& a, double min, double max);
// cond (u8, 0 = false) ? a : b, all three broadcast together.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

// Comparisons return u8 tensors (1 = true).
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);

// In place (a is modified and returned; b broadcasts to a's shape).
Tensor& add_(Tensor& a, const Tensor& b);
Tensor& sub_(Tensor& a, const Tensor& b);
Tensor& mul_(Tensor& a, const Tensor& b);
Tensor& div_(Tensor& a, const Tensor& b);
Tensor& add_(Tensor& a, double b);
Tensor& mul_(Tensor& a, double b);
Tensor& relu_(Tensor& a);
Tensor& clamp_(Tensor& a, double min, double max);
Tensor& neg_(Tensor& a);
Tensor& fill_(Tensor& a, double value);
Tensor& zero_(Tensor& a);
Tensor& copy_(Tensor& dst, const Tensor& src);  // src broadcasts; dtypes convert
// a += alpha * b (the optimizer's axpy), in place.
Tensor& add_scaled_(Tensor& a, const Tensor& b, double alpha);

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& a) { return neg(a); }
inline Tensor operator+(const Tensor& a, double b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, double b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, double b) { return div(a, b); }
inline Tensor operator+(double a, const Tensor& b) { return add(b, a); }
inline Tensor operator-(double a, const Tensor& b) { return add(neg(b), a); }
inline Tensor operator*(double a, const Tensor& b) { return mul(b, a); }
// In place, like add_ and friends (refused on a tensor autograd tracks).
inline Tensor& operator+=(Tensor& a, const Tensor& b) { return add_(a, b); }
inline Tensor& operator-=(Tensor& a, const Tensor& b) { return sub_(a, b); }
inline Tensor& operator*=(Tensor& a, const Tensor& b) { return mul_(a, b); }
inline Tensor& operator/=(Tensor& a, const Tensor& b) { return div_(a, b); }
inline Tensor& operator+=(Tensor& a, double b) { return add_(a, b); }
inline Tensor& operator*=(Tensor& a, double b) { return mul_(a, b); }

// Refuses an in-place op on a tensor autograd is tracking (named `op` in the error).
void check_inplace(const Tensor& a, const char* op);

}  // namespace ringlet::tensor
