// The per-element bodies of the elementwise ops, written once: the CPU kernels
// (tensor/ops/elementwise.cpp) call them in their vectorizable loops, the device kernels
// (device_kernels_impl.h) in one thread per element on CUDA and on the emulated device.
// Piecewise rules are selects of plain values (see tensor/README.md, "Kernels that vectorize").
#pragma once

#include <cstdint>

#include "tensor/kernels/hd.h"

namespace ringlet::tensor::kernels {

enum class BinaryOp : std::uint8_t { add, sub, mul, div, pow, maximum, minimum };
enum class UnaryOp : std::uint8_t {
  neg,
  exp,
  log,
  sqrt,
  abs,
  relu,
  sigmoid,
  tanh,
  clamp,
  pow_scalar
};
enum class CompareOp : std::uint8_t { eq, ne, lt, le, gt, ge };

struct UnaryParams {
  UnaryOp kind = UnaryOp::neg;
  double p0 = 0.0, p1 = 0.0;  // clamp bounds or the exponent
};

inline const char* binary_name(BinaryOp op) {
  constexpr const char* names[] = {"add", "sub", "mul", "div", "pow", "maximum", "minimum"};
  return names[static_cast<int>(op)];
}
inline const char* unary_name(UnaryOp op) {
  constexpr const char* names[] = {"neg",  "exp",     "log",  "sqrt",  "abs",
                                   "relu", "sigmoid", "tanh", "clamp", "pow"};
  return names[static_cast<int>(op)];
}
inline const char* compare_name(CompareOp op) {
  constexpr const char* names[] = {"eq", "ne", "lt", "le", "gt", "ge"};
  return names[static_cast<int>(op)];
}
// Ops that are defined on integers too (the others need f32 / f64).
constexpr bool integer_friendly(BinaryOp op) { return op != BinaryOp::div && op != BinaryOp::pow; }
constexpr bool integer_friendly(UnaryOp op) {
  return op == UnaryOp::neg || op == UnaryOp::abs || op == UnaryOp::relu || op == UnaryOp::clamp;
}
// Whether a kernel of op on T exists (dispatch never reaches the others; they are not built).
template <class T, auto Op>
constexpr bool defined_on() {
  return std::is_floating_point_v<T> || integer_friendly(Op);
}

template <class T, BinaryOp Op>
struct BinaryFn {
  RINGLET_HD T operator()(T x, T y) const {
    if constexpr (!defined_on<T, Op>())
      return x;  // never dispatched
    else if constexpr (Op == BinaryOp::add)
      return x + y;
    else if constexpr (Op == BinaryOp::sub)
      return x - y;
    else if constexpr (Op == BinaryOp::mul)
      return x * y;
    else if constexpr (Op == BinaryOp::div)
      return x / y;
    else if constexpr (Op == BinaryOp::pow)
      return static_cast<T>(hd_pow(x, y));
    else if constexpr (Op == BinaryOp::maximum)
      return x > y || x != x ? x : y;  // a NaN on either side wins, as PyTorch's
    else if constexpr (Op == BinaryOp::minimum)
      return x < y || x != x ? x : y;
  }
};

template <class T, UnaryOp Op>
struct UnaryFn {
  double p0 = 0.0, p1 = 0.0;
  RINGLET_HD T operator()(T x) const {
    if constexpr (!defined_on<T, Op>())
      return x;  // never dispatched
    else if constexpr (Op == UnaryOp::neg)
      return static_cast<T>(-x);
    else if constexpr (Op == UnaryOp::exp)
      return static_cast<T>(hd_exp(x));
    else if constexpr (Op == UnaryOp::log)
      return static_cast<T>(hd_log(x));
    else if constexpr (Op == UnaryOp::sqrt)
      return static_cast<T>(hd_sqrt(x));
    else if constexpr (Op == UnaryOp::abs && std::is_unsigned_v<T>)
      return x;
    else if constexpr (Op == UnaryOp::abs)
      return x < T(0) ? static_cast<T>(-x) : x;
    else if constexpr (Op == UnaryOp::relu)
      return x > T(0) || x != x ? x : T(0);  // NaN stays NaN
    else if constexpr (Op == UnaryOp::sigmoid)
      return static_cast<T>(1 / (1 + hd_exp(-static_cast<double>(x))));
    else if constexpr (Op == UnaryOp::tanh)
      return static_cast<T>(hd_tanh(x));
    else if constexpr (Op == UnaryOp::clamp)
      return x < static_cast<T>(p0)   ? static_cast<T>(p0)
             : x > static_cast<T>(p1) ? static_cast<T>(p1)
                                      : x;
    else if constexpr (Op == UnaryOp::pow_scalar)
      return static_cast<T>(hd_pow(x, static_cast<T>(p0)));
  }
};

// g * d out / d x at x, with y = out(x): the unary ops' backward, in the same pass.
template <class T, UnaryOp Op>
struct UnaryGradFn {
  double p0 = 0.0, p1 = 0.0;
  RINGLET_HD T operator()(T g, T x, T y) const {
    if constexpr (!std::is_floating_point_v<T>)
      return g;  // gradients are floating
    else if constexpr (Op == UnaryOp::neg)
      return static_cast<T>(-g);
    else if constexpr (Op == UnaryOp::exp)
      return g * y;
    else if constexpr (Op == UnaryOp::log)
      return g / x;
    else if constexpr (Op == UnaryOp::sqrt)
      return g * (T(0.5) / y);
    else if constexpr (Op == UnaryOp::abs)
      return x > T(0) ? g : x < T(0) ? static_cast<T>(-g) : T(0);
    else if constexpr (Op == UnaryOp::relu)
      return x <= T(0) ? T(0) : g;  // PyTorch's threshold rule: a NaN passes the gradient
    else if constexpr (Op == UnaryOp::sigmoid)
      return g * (y * (T(1) - y));
    else if constexpr (Op == UnaryOp::tanh)
      return g * (T(1) - y * y);
    else if constexpr (Op == UnaryOp::clamp)
      return x >= static_cast<T>(p0) && x <= static_cast<T>(p1) ? g : T(0);
    else if constexpr (Op == UnaryOp::pow_scalar)
      return p0 == 0.0
                 ? T(0)
                 : g * (static_cast<T>(p0) * static_cast<T>(hd_pow(x, static_cast<T>(p0 - 1.0))));
  }
};

template <class T, CompareOp Op>
struct CompareFn {
  RINGLET_HD std::uint8_t operator()(T x, T y) const {
    if constexpr (Op == CompareOp::eq)
      return x == y;
    else if constexpr (Op == CompareOp::ne)
      return x != y;
    else if constexpr (Op == CompareOp::lt)
      return x < y;
    else if constexpr (Op == CompareOp::le)
      return x <= y;
    else if constexpr (Op == CompareOp::gt)
      return x > y;
    else if constexpr (Op == CompareOp::ge)
      return x >= y;
  }
};

// a + alpha * b (SGD's and the reducer's axpy).
template <class T>
struct AddScaledFn {
  T alpha;
  RINGLET_HD T operator()(T x, T y) const { return x + alpha * y; }
};

// Calls body(std::integral_constant<Enum, kind>{}) for the runtime kind, so kernels are
// instantiated per kind and the switch stays out of the inner loop.
template <class Enum, Enum... Kinds, class Body>
void with_kind(Enum kind, Body&& body) {
  static_cast<void>(
      ((kind == Kinds ? (body(std::integral_constant<Enum, Kinds>{}), true) : false) || ...));
}
template <class Body>
void with_binary(BinaryOp op, Body&& body) {
  using B = BinaryOp;
  with_kind<B, B::add, B::sub, B::mul, B::div, B::pow, B::maximum, B::minimum>(op, body);
}
template <class Body>
void with_unary(UnaryOp op, Body&& body) {
  using U = UnaryOp;
  with_kind<U, U::neg, U::exp, U::log, U::sqrt, U::abs, U::relu, U::sigmoid, U::tanh, U::clamp,
            U::pow_scalar>(op, body);
}
template <class Body>
void with_compare(CompareOp op, Body&& body) {
  using C = CompareOp;
  with_kind<C, C::eq, C::ne, C::lt, C::le, C::gt, C::ge>(op, body);
}

}  // namespace ringlet::tensor::kernels
