// Elementwise ops: one strided kernel for binary ops (NumPy broadcasting through stride-0
// views), one for unary ops and one for unary backward (the derivative is computed in the
// same pass as the product with the incoming gradient). Contiguous operands take a flat,
// vectorizable loop split over core::parallel_for.
#include "tensor/ops/elementwise.h"

#include <algorithm>
#include <cmath>

#include "core/threads.h"
#include "tensor/autograd.h"
#include "tensor/cpu/copy.h"
#include "tensor/cpu/dispatch.h"
#include "tensor/cpu/loops.h"
#include "tensor/ops/creation.h"
#include "tensor/ops/device_check.h"
#include "tensor/ops/movement.h"

namespace ringlet::tensor {
namespace {

constexpr std::int64_t kParallelGrain = 1 << 15;

// `t` viewed with `shape` (broadcast dims get stride 0); no autograd node.
Tensor broadcast_view(const Tensor& t, const Shape& shape) {
  if (t.shape() == shape) return t;
  const std::size_t lead = shape.size() - t.shape().size();
  Shape strides(shape.size(), 0);
  for (std::size_t i = lead; i < shape.size(); ++i) {
    strides[i] = t.shape()[i - lead] == 1 ? 0 : t.strides()[i - lead];
  }
  return Tensor::make_view(t.storage(), shape, strides, t.offset(), t.dtype());
}

bool flat(const Tensor& t, const Tensor& out) {
  return t.numel() == 1 || (t.shape() == out.shape() && t.is_contiguous());
}

// out[i] = f(in[i]...) for K inputs already broadcast to out's shape.
template <class TOut, class TIn, std::size_t K, class F>
void map_kernel(const Tensor& out, const std::array<Tensor, K>& in, F f) {
  TOut* o = static_cast<TOut*>(out.raw_data());
  std::array<const TIn*, K> p;
  for (std::size_t k = 0; k < K; ++k) p[k] = static_cast<const TIn*>(in[k].raw_data());
  bool all_flat = out.is_contiguous();
  std::array<bool, K> scalar{};
  for (std::size_t k = 0; k < K; ++k) {
    all_flat = all_flat && flat(in[k], out);
    scalar[k] = in[k].numel() == 1;
  }
  if (all_flat) {
    // No per-element test in the common case (no scalar operand), so the loop vectorizes and
    // a data-dependent select such as relu's x > 0 becomes a mask, not a mispredicted branch.
    const bool any_scalar = std::find(scalar.begin(), scalar.end(), true) != scalar.end();
    core::parallel_for(out.numel(), kParallelGrain, [&](std::int64_t b, std::int64_t e) {
      [&]<std::size_t... I>(std::index_sequence<I...>) {
        if (!any_scalar) {
          for (std::int64_t i = b; i < e; ++i) o[i] = f(p[I][i]...);
        } else {
          for (std::int64_t i = b; i < e; ++i) o[i] = f(p[I][scalar[I] ? 0 : i]...);
        }
      }
      (std::make_index_sequence<K>());
    });
    return;
  }
  std::array<const Shape*, K + 1> strides;
  strides[0] = &out.strides();
  std::array<Tensor, K> views;
  for (std::size_t k = 0; k < K; ++k) {
    views[k] = broadcast_view(in[k], out.shape());
    strides[k + 1] = &views[k].strides();
  }
  cpu::for_each_offset<K + 1>(out.shape(), strides,
                              [&](const std::array<std::int64_t, K + 1>& off) {
                                [&]<std::size_t... I>(std::index_sequence<I...>) {
                                  o[off[0]] = f(p[I][off[I + 1]]...);
                                }
                                (std::make_index_sequence<K>());
                              });
}

enum class Binary { add, sub, mul, div, pow, maximum, minimum };

const char* binary_name(Binary op) {
  switch (op) {
    case Binary::add: return "add";
    case Binary::sub: return "sub";
    case Binary::mul: return "mul";
    case Binary::div: return "div";
    case Binary::pow: return "pow";
    case Binary::maximum: return "maximum";
    case Binary::minimum: return "minimum";
  }
  return "?";
}

// Calls body(std::integral_constant<Enum, kind>) for the runtime kind: kernels are instantiated
// per kind, so the switch leaves the inner loop and the loop can vectorize.
template <class Enum, Enum... Kinds, class Body>
void with_kind(Enum kind, Body&& body) {
  ((kind == Kinds ? (body(std::integral_constant<Enum, Kinds>{}), true) : false) || ...);
}

template <class Body>
void with_binary(Binary op, Body&& body) {
  with_kind<Binary, Binary::add, Binary::sub, Binary::mul, Binary::div, Binary::pow,
            Binary::maximum, Binary::minimum>(op, body);
}

template <class T, Binary Op>
auto binary_fn() {
  return [](T x, T y) -> T {
    switch (Op) {
      case Binary::add: return x + y;
      case Binary::sub: return x - y;
      case Binary::mul: return x * y;
      case Binary::div: return x / y;
      case Binary::pow: return static_cast<T>(std::pow(x, y));
      case Binary::maximum: return x > y ? x : y;
      case Binary::minimum: return x < y ? x : y;
    }
    return x;
  };
}

void check_binary(const Tensor& a, const Tensor& b, const char* op) {
  require_cpu(a, op);
  require_cpu(b, op);
  RINGLET_CHECK(a.dtype() == b.dtype(), DTypeError, op, ": dtypes differ: ", a.dtype(), " ",
                shape_str(a.shape()), " and ", b.dtype(), " ", shape_str(b.shape()),
                " (convert one with .to())");
}

// Writes op(a, b) into out (out's shape is the broadcast shape; out may alias a).
void binary_into(Binary op, const Tensor& out, const Tensor& a, const Tensor& b) {
  const bool integer_ok = op != Binary::div && op != Binary::pow;
  auto run = [&]<class T>() {
    with_binary(op, [&](auto kind) { map_kernel<T, T, 2>(out, {a, b}, binary_fn<T, kind()>()); });
  };
  if (integer_ok) {
    cpu::dispatch_numeric(a.dtype(), binary_name(op), run);
  } else {
    cpu::dispatch_floating(a.dtype(), binary_name(op), run);
  }
}

Tensor binary(Binary op, const Tensor& a, const Tensor& b) {
  const char* name = binary_name(op);
  check_binary(a, b, name);
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  Tensor out = Tensor::empty(shape, a.dtype());
  binary_into(op, out, a, b);
  const Shape sa = a.shape(), sb = b.shape();
  // Backward rules in terms of differentiable-free tensor ops (grad mode is off in backward).
  BackwardFn rule;
  switch (op) {
    case Binary::add:
      rule = [sa, sb](const Tensor& g, const std::vector<bool>& n) {
        return std::vector<Tensor>{n[0] ? sum_to(g, sa) : Tensor(),
                                   n[1] ? sum_to(g, sb) : Tensor()};
      };
      break;
    case Binary::sub:
      rule = [sa, sb](const Tensor& g, const std::vector<bool>& n) {
        return std::vector<Tensor>{n[0] ? sum_to(g, sa) : Tensor(),
                                   n[1] ? sum_to(neg(g), sb) : Tensor()};
      };
      break;
    case Binary::mul:
      rule = [a = a.detach(), b = b.detach()](const Tensor& g, const std::vector<bool>& n) {
        return std::vector<Tensor>{n[0] ? sum_to(mul(g, b), a.shape()) : Tensor(),
                                   n[1] ? sum_to(mul(g, a), b.shape()) : Tensor()};
      };
      break;
    case Binary::div:
      rule = [a = a.detach(), b = b.detach()](const Tensor& g, const std::vector<bool>& n) {
        return std::vector<Tensor>{
            n[0] ? sum_to(div(g, b), a.shape()) : Tensor(),
            n[1] ? sum_to(neg(div(mul(g, a), mul(b, b))), b.shape()) : Tensor()};
      };
      break;
    case Binary::pow:
      rule = [a = a.detach(), b = b.detach(), o = out.detach()](const Tensor& g,
                                                                const std::vector<bool>& n) {
        return std::vector<Tensor>{
            n[0] ? sum_to(mul(g, mul(b, pow(a, sub(b, 1.0)))), a.shape()) : Tensor(),
            n[1] ? sum_to(mul(g, mul(o, log(a))), b.shape()) : Tensor()};
      };
      break;
    case Binary::maximum:
    case Binary::minimum:
      rule = [a = a.detach(), b = b.detach(), op](const Tensor& g, const std::vector<bool>& n) {
        // The winner takes the gradient; ties split it evenly (as PyTorch).
        const Tensor wins_a = (op == Binary::maximum ? gt(a, b) : lt(a, b)).to(g.dtype());
        const Tensor ties = eq(a, b).to(g.dtype());
        const Tensor share_a = add(wins_a, mul(ties, 0.5));
        const Tensor share_b = sub(sub(ones_like(share_a), wins_a), mul(ties, 0.5));
        return std::vector<Tensor>{n[0] ? sum_to(mul(g, share_a), a.shape()) : Tensor(),
                                   n[1] ? sum_to(mul(g, share_b), b.shape()) : Tensor()};
      };
      break;
  }
  return record(name, out, {a, b}, rule);
}

enum class Unary { neg, exp, log, sqrt, abs, relu, sigmoid, tanh, clamp, pow_scalar };

struct UnaryOp {
  Unary kind;
  double p0 = 0.0, p1 = 0.0;  // clamp bounds or the exponent
};

const char* unary_name(Unary op) {
  switch (op) {
    case Unary::neg: return "neg";
    case Unary::exp: return "exp";
    case Unary::log: return "log";
    case Unary::sqrt: return "sqrt";
    case Unary::abs: return "abs";
    case Unary::relu: return "relu";
    case Unary::sigmoid: return "sigmoid";
    case Unary::tanh: return "tanh";
    case Unary::clamp: return "clamp";
    case Unary::pow_scalar: return "pow";
  }
  return "?";
}

template <class Body>
void with_unary(Unary kind, Body&& body) {
  with_kind<Unary, Unary::neg, Unary::exp, Unary::log, Unary::sqrt, Unary::abs, Unary::relu,
            Unary::sigmoid, Unary::tanh, Unary::clamp, Unary::pow_scalar>(kind, body);
}

template <class T, Unary Kind>
auto unary_fn(UnaryOp op) {
  return [op](T x) -> T {
    switch (Kind) {
      case Unary::neg: return static_cast<T>(-x);
      case Unary::exp: return static_cast<T>(std::exp(x));
      case Unary::log: return static_cast<T>(std::log(x));
      case Unary::sqrt: return static_cast<T>(std::sqrt(x));
      case Unary::abs: return x < T(0) ? static_cast<T>(-x) : x;
      case Unary::relu: return x > T(0) ? x : T(0);
      case Unary::sigmoid: return static_cast<T>(1 / (1 + std::exp(-static_cast<double>(x))));
      case Unary::tanh: return static_cast<T>(std::tanh(x));
      case Unary::clamp:
        return x < static_cast<T>(op.p0)   ? static_cast<T>(op.p0)
               : x > static_cast<T>(op.p1) ? static_cast<T>(op.p1)
                                           : x;
      case Unary::pow_scalar: return static_cast<T>(std::pow(x, static_cast<T>(op.p0)));
    }
    return x;
  };
}

// The gradient g * d out / d x at x (with y = out(x)), for the backward kernel. Piecewise
// rules select g (or 0) instead of multiplying by a 0/1 derivative: a select of plain values
// can run unconditionally, so the loop vectorizes (a multiply in one arm of a branch cannot,
// as it might raise a floating-point exception the branch would have skipped), and a masked
// position gets 0 even where g is inf or nan, as in PyTorch.
template <class T, Unary Kind>
auto gradient_fn(UnaryOp op) {
  return [op](T g, T x, T y) -> T {
    switch (Kind) {
      case Unary::neg: return static_cast<T>(-g);
      case Unary::exp: return g * y;
      case Unary::log: return g / x;
      case Unary::sqrt: return g * (T(0.5) / y);
      case Unary::abs: return x > T(0) ? g : x < T(0) ? static_cast<T>(-g) : T(0);
      case Unary::relu: return x > T(0) ? g : T(0);
      case Unary::sigmoid: return g * (y * (T(1) - y));
      case Unary::tanh: return g * (T(1) - y * y);
      case Unary::clamp: return x >= static_cast<T>(op.p0) && x <= static_cast<T>(op.p1) ? g : T(0);
      case Unary::pow_scalar:
        return op.p0 == 0.0 ? T(0)
                            : g * (static_cast<T>(op.p0) *
                                   static_cast<T>(std::pow(x, static_cast<T>(op.p0 - 1.0))));
    }
    return T(0);
  };
}

bool integer_friendly(Unary kind) {
  return kind == Unary::neg || kind == Unary::abs || kind == Unary::relu || kind == Unary::clamp;
}

void unary_into(UnaryOp op, const Tensor& out, const Tensor& a) {
  auto run = [&]<class T>() {
    with_unary(op.kind, [&](auto kind) { map_kernel<T, T, 1>(out, {a}, unary_fn<T, kind()>(op)); });
  };
  if (integer_friendly(op.kind)) {
    cpu::dispatch_numeric(a.dtype(), unary_name(op.kind), run);
  } else {
    cpu::dispatch_floating(a.dtype(), unary_name(op.kind), run);
  }
}

Tensor unary(UnaryOp op, const Tensor& a) {
  const char* name = unary_name(op.kind);
  require_cpu(a, name);
  Tensor out = Tensor::empty(a.shape(), a.dtype());
  unary_into(op, out, a);
  return record(name, out, {a},
                [op, a = a.detach(), o = out.detach()](const Tensor& g, const std::vector<bool>&) {
                  Tensor grad = Tensor::empty(a.shape(), g.dtype());
                  cpu::dispatch_floating(g.dtype(), unary_name(op.kind), [&]<class T>() {
                    with_unary(op.kind, [&](auto kind) {
                      map_kernel<T, T, 3>(grad, {g, a, o}, gradient_fn<T, kind()>(op));
                    });
                  });
                  return std::vector<Tensor>{grad};
                });
}

enum class Compare { eq, ne, lt, le, gt, ge };

Tensor compare(Compare op, const Tensor& a, const Tensor& b, const char* name) {
  check_binary(a, b, name);
  Tensor out = Tensor::empty(broadcast_shapes(a.shape(), b.shape(), name), DType::u8);
  cpu::dispatch_numeric(a.dtype(), name, [&]<class T>() {
    auto cmp = [op](T x, T y) -> std::uint8_t {
      switch (op) {
        case Compare::eq: return x == y;
        case Compare::ne: return x != y;
        case Compare::lt: return x < y;
        case Compare::le: return x <= y;
        case Compare::gt: return x > y;
        case Compare::ge: return x >= y;
      }
      return 0;
    };
    map_kernel<std::uint8_t, T, 2>(out, {a, b}, cmp);
  });
  return out;
}

Tensor scalar_like(const Tensor& a, double value) { return scalar_tensor(value, a.dtype()); }

// In-place binary op: b broadcasts to a's shape.
Tensor& binary_inplace(Binary op, Tensor& a, const Tensor& b) {
  const char* name = binary_name(op);
  check_inplace(a, name);
  check_binary(a, b, name);
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  RINGLET_CHECK(shape == a.shape(), ShapeError, name, "_: operand of shape ", shape_str(b.shape()),
                " does not broadcast to the in-place target's shape ", shape_str(a.shape()));
  binary_into(op, a, a, b);
  return a;
}

Tensor& unary_inplace(UnaryOp op, Tensor& a) {
  check_inplace(a, unary_name(op.kind));
  require_cpu(a, unary_name(op.kind));
  unary_into(op, a, a);
  return a;
}

}  // namespace

void check_inplace(const Tensor& a, const char* op) {
  RINGLET_CHECK(!(grad_enabled() && a.requires_grad()), AutogradError, op,
                "_: in-place operation on a tensor that requires grad (shape ",
                shape_str(a.shape()),
                "); autograd would lose the values it saved. Use the out-of-place op, or wrap "
                "the update in NoGradGuard");
}

Tensor add(const Tensor& a, const Tensor& b) { return binary(Binary::add, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary(Binary::sub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary(Binary::mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary(Binary::div, a, b); }
Tensor pow(const Tensor& a, const Tensor& b) { return binary(Binary::pow, a, b); }
Tensor maximum(const Tensor& a, const Tensor& b) { return binary(Binary::maximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary(Binary::minimum, a, b); }
Tensor add(const Tensor& a, double b) { return add(a, scalar_like(a, b)); }
Tensor sub(const Tensor& a, double b) { return sub(a, scalar_like(a, b)); }
Tensor mul(const Tensor& a, double b) { return mul(a, scalar_like(a, b)); }
Tensor div(const Tensor& a, double b) { return div(a, scalar_like(a, b)); }
Tensor pow(const Tensor& a, double exponent) { return unary({Unary::pow_scalar, exponent}, a); }

Tensor neg(const Tensor& a) { return unary({Unary::neg}, a); }
Tensor exp(const Tensor& a) { return unary({Unary::exp}, a); }
Tensor log(const Tensor& a) { return unary({Unary::log}, a); }
Tensor sqrt(const Tensor& a) { return unary({Unary::sqrt}, a); }
Tensor abs(const Tensor& a) { return unary({Unary::abs}, a); }
Tensor relu(const Tensor& a) { return unary({Unary::relu}, a); }
Tensor sigmoid(const Tensor& a) { return unary({Unary::sigmoid}, a); }
Tensor tanh(const Tensor& a) { return unary({Unary::tanh}, a); }
Tensor clamp(const Tensor& a, double min, double max) {
  RINGLET_CHECK(min <= max, ValueError, "clamp: min ", min, " > max ", max);
  return unary({Unary::clamp, min, max}, a);
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  require_cpu(cond, "where");
  check_binary(a, b, "where");
  RINGLET_CHECK(cond.dtype() == DType::u8, DTypeError, "where: condition must be u8, got ",
                cond.dtype(), " ", shape_str(cond.shape()));
  const Shape shape =
      broadcast_shapes(cond.shape(), broadcast_shapes(a.shape(), b.shape(), "where"), "where");
  Tensor out = Tensor::empty(shape, a.dtype());
  cpu::dispatch_numeric(a.dtype(), "where", [&]<class T>() {
    // Views share a, b and cond's storage and offset, so their raw pointers are the same.
    const Tensor va = broadcast_view(a, shape), vb = broadcast_view(b, shape),
                 vc = broadcast_view(cond, shape);
    const T* pa = static_cast<const T*>(a.raw_data());
    const T* pb = static_cast<const T*>(b.raw_data());
    const auto* pc = static_cast<const std::uint8_t*>(cond.raw_data());
    T* o = out.data<T>();
    cpu::for_each_offset<4>(shape, {&out.strides(), &vc.strides(), &va.strides(), &vb.strides()},
                            [&](const std::array<std::int64_t, 4>& off) {
                              o[off[0]] = pc[off[1]] ? pa[off[2]] : pb[off[3]];
                            });
  });
  return record(
      "where", out, {a, b},
      [cond, sa = a.shape(), sb = b.shape()](const Tensor& g, const std::vector<bool>& n) {
        const Tensor zero = zeros({}, g.dtype());
        return std::vector<Tensor>{n[0] ? sum_to(where(cond, g, zero), sa) : Tensor(),
                                   n[1] ? sum_to(where(cond, zero, g), sb) : Tensor()};
      });
}

Tensor eq(const Tensor& a, const Tensor& b) { return compare(Compare::eq, a, b, "eq"); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare(Compare::ne, a, b, "ne"); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare(Compare::lt, a, b, "lt"); }
Tensor le(const Tensor& a, const Tensor& b) { return compare(Compare::le, a, b, "le"); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare(Compare::gt, a, b, "gt"); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare(Compare::ge, a, b, "ge"); }

Tensor& add_(Tensor& a, const Tensor& b) { return binary_inplace(Binary::add, a, b); }
Tensor& sub_(Tensor& a, const Tensor& b) { return binary_inplace(Binary::sub, a, b); }
Tensor& mul_(Tensor& a, const Tensor& b) { return binary_inplace(Binary::mul, a, b); }
Tensor& div_(Tensor& a, const Tensor& b) { return binary_inplace(Binary::div, a, b); }
Tensor& add_(Tensor& a, double b) { return binary_inplace(Binary::add, a, scalar_like(a, b)); }
Tensor& mul_(Tensor& a, double b) { return binary_inplace(Binary::mul, a, scalar_like(a, b)); }
Tensor& relu_(Tensor& a) { return unary_inplace({Unary::relu}, a); }
Tensor& neg_(Tensor& a) { return unary_inplace({Unary::neg}, a); }
Tensor& clamp_(Tensor& a, double min, double max) {
  RINGLET_CHECK(min <= max, ValueError, "clamp_: min ", min, " > max ", max);
  return unary_inplace({Unary::clamp, min, max}, a);
}

Tensor& fill_(Tensor& a, double value) {
  check_inplace(a, "fill");
  require_cpu(a, "fill");
  cpu::dispatch_all(a.dtype(), [&]<class T>() {
    const T v = cpu::convert<T>(value);
    map_kernel<T, T, 0>(a, {}, [v]() { return v; });
  });
  return a;
}

Tensor& zero_(Tensor& a) { return fill_(a, 0.0); }

Tensor& copy_(Tensor& dst, const Tensor& src) {
  check_inplace(dst, "copy");
  require_cpu(dst, "copy");
  require_cpu(src, "copy");
  const Shape shape = broadcast_shapes(dst.shape(), src.shape(), "copy_");
  RINGLET_CHECK(shape == dst.shape(), ShapeError, "copy_: source of shape ", shape_str(src.shape()),
                " does not broadcast to the destination's shape ", shape_str(dst.shape()));
  cpu::copy(dst, broadcast_view(src, shape));
  return dst;
}

Tensor& add_scaled_(Tensor& a, const Tensor& b, double alpha) {
  check_inplace(a, "add_scaled");
  check_binary(a, b, "add_scaled_");
  RINGLET_CHECK(broadcast_shapes(a.shape(), b.shape(), "add_scaled_") == a.shape(), ShapeError,
                "add_scaled_: operand of shape ", shape_str(b.shape()),
                " does not broadcast to the target's shape ", shape_str(a.shape()));
  cpu::dispatch_floating(a.dtype(), "add_scaled_", [&]<class T>() {
    const T s = static_cast<T>(alpha);
    map_kernel<T, T, 2>(a, {a, b}, [s](T x, T y) { return x + s * y; });
  });
  return a;
}

}  // namespace ringlet::tensor
