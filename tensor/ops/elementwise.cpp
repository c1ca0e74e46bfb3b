// Elementwise ops: one strided kernel for binary ops (NumPy broadcasting through stride-0
// views), one for unary ops and one for unary backward (the derivative is computed in the
// same pass as the product with the incoming gradient). Contiguous operands take a flat,
// vectorizable loop split over core::parallel_for: for the hottest ops (relu and its gradient,
// add sub mul div maximum minimum on f32/f64) the one of the instruction-set level in use
// (tensor/cpu/flat_ops.h). The per-element bodies live in
// tensor/kernels/elementwise.h, shared with the device kernels that device tensors dispatch to.
#include "tensor/ops/elementwise.h"

#include <algorithm>
#include <cmath>

#include "core/threads.h"
#include "tensor/autograd.h"
#include "tensor/cpu/copy.h"
#include "tensor/cpu/dispatch.h"
#include "tensor/cpu/flat_ops.h"
#include "tensor/cpu/loops.h"
#include "tensor/device/transfer.h"
#include "tensor/kernels/elementwise.h"
#include "tensor/ops/creation.h"
#include "tensor/ops/device_dispatch.h"
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

using Binary = kernels::BinaryOp;
using kernels::binary_name;
using kernels::with_binary;

template <class T, Binary Op>
auto binary_fn() {
  return kernels::BinaryFn<T, Op>{};
}

void check_binary(const Tensor& a, const Tensor& b, const char* op) {
  same_device({&a, &b}, op);
  RINGLET_CHECK(a.dtype() == b.dtype(), DTypeError, op, ": dtypes differ: ", a.dtype(), " ",
                shape_str(a.shape()), " and ", b.dtype(), " ", shape_str(b.shape()),
                " (convert one with .to())");
}

// Writes op(a, b) into out (out's shape is the broadcast shape; out may alias a).
void binary_into(Binary op, const Tensor& out, const Tensor& a, const Tensor& b) {
  if (!out.device().is_cpu()) {
    kernels_for(out.device())
        .binary(op, kernel_view(out), kernel_view(a, out.shape()), kernel_view(b, out.shape()),
                stream_for(out.device()));
    return;
  }
  if (cpu::flat_binary(op, out, a, b)) return;  // the level's vector loop
  const bool integer_ok = kernels::integer_friendly(op);
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
  Tensor out = Tensor::empty(shape, a.dtype(), a.device());
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
        // The loser gets no gradient, ties split it evenly and, where a NaN makes the pair
        // unordered, both get all of it (PyTorch's rule).
        const Tensor a_loses = (op == Binary::maximum ? lt(a, b) : gt(a, b)).to(g.dtype());
        const Tensor b_loses = (op == Binary::maximum ? gt(a, b) : lt(a, b)).to(g.dtype());
        const Tensor half_ties = mul(eq(a, b).to(g.dtype()), 0.5);
        const Tensor share_a = sub(sub(ones_like(a_loses), a_loses), half_ties);
        const Tensor share_b = sub(sub(ones_like(b_loses), b_loses), half_ties);
        return std::vector<Tensor>{n[0] ? sum_to(mul(g, share_a), a.shape()) : Tensor(),
                                   n[1] ? sum_to(mul(g, share_b), b.shape()) : Tensor()};
      };
      break;
  }
  return record(name, out, {a, b}, rule);
}

using Unary = kernels::UnaryOp;
using UnaryOp = kernels::UnaryParams;
using kernels::unary_name;
using kernels::with_unary;

void unary_into(UnaryOp op, const Tensor& out, const Tensor& a) {
  if (!out.device().is_cpu()) {
    kernels_for(out.device()).unary(op, kernel_view(out), kernel_view(a), stream_for(out.device()));
    return;
  }
  if (op.kind == kernels::UnaryOp::relu && cpu::flat_relu(out, a)) return;
  auto run = [&]<class T>() {
    with_unary(op.kind, [&](auto kind) {
      map_kernel<T, T, 1>(out, {a}, kernels::UnaryFn<T, kind()>{op.p0, op.p1});
    });
  };
  if (kernels::integer_friendly(op.kind)) {
    cpu::dispatch_numeric(a.dtype(), unary_name(op.kind), run);
  } else {
    cpu::dispatch_floating(a.dtype(), unary_name(op.kind), run);
  }
}

// grad * d op(a) / da, with o = op(a).
Tensor unary_gradient(UnaryOp op, const Tensor& g, const Tensor& a, const Tensor& o) {
  Tensor grad = Tensor::empty(a.shape(), g.dtype(), g.device());
  if (!g.device().is_cpu()) {
    kernels_for(g.device())
        .unary_backward(op, kernel_view(grad), kernel_view(g, a.shape()), kernel_view(a),
                        kernel_view(o), stream_for(g.device()));
    return grad;
  }
  if (op.kind == kernels::UnaryOp::relu && cpu::flat_relu_grad(grad, g, a)) return grad;
  cpu::dispatch_floating(g.dtype(), unary_name(op.kind), [&]<class T>() {
    with_unary(op.kind, [&](auto kind) {
      map_kernel<T, T, 3>(grad, {g, a, o}, kernels::UnaryGradFn<T, kind()>{op.p0, op.p1});
    });
  });
  return grad;
}

Tensor unary(UnaryOp op, const Tensor& a) {
  const char* name = unary_name(op.kind);
  Tensor out = Tensor::empty(a.shape(), a.dtype(), a.device());
  unary_into(op, out, a);
  return record(name, out, {a},
                [op, a = a.detach(), o = out.detach()](const Tensor& g, const std::vector<bool>&) {
                  return std::vector<Tensor>{unary_gradient(op, g, a, o)};
                });
}

using Compare = kernels::CompareOp;

Tensor compare(Compare op, const Tensor& a, const Tensor& b, const char* name) {
  check_binary(a, b, name);
  Tensor out = Tensor::empty(broadcast_shapes(a.shape(), b.shape(), name), DType::u8, a.device());
  if (!out.device().is_cpu()) {
    kernels_for(out.device())
        .compare(op, kernel_view(out), kernel_view(a, out.shape()), kernel_view(b, out.shape()),
                 stream_for(out.device()));
    return out;
  }
  cpu::dispatch_numeric(a.dtype(), name, [&]<class T>() {
    kernels::with_compare(op, [&](auto kind) {
      map_kernel<std::uint8_t, T, 2>(out, {a, b}, kernels::CompareFn<T, kind()>{});
    });
  });
  return out;
}

// A 0-d tensor of a's dtype on a's device.
Tensor scalar_like(const Tensor& a, double value) { return full({}, value, a.dtype(), a.device()); }

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
Tensor relu_gradient(const Tensor& grad, const Tensor& relu_output) {
  return unary_gradient({Unary::relu}, grad, relu_output, relu_output);
}
Tensor sigmoid(const Tensor& a) { return unary({Unary::sigmoid}, a); }
Tensor tanh(const Tensor& a) { return unary({Unary::tanh}, a); }
Tensor clamp(const Tensor& a, double min, double max) {
  RINGLET_CHECK(min <= max, ValueError, "clamp: min ", min, " > max ", max);
  return unary({Unary::clamp, min, max}, a);
}

// out = cond ? a : b on the host, every operand broadcast to out's shape.
void where_cpu(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  const Shape& shape = out.shape();
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
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  same_device({&cond, &a, &b}, "where");
  check_binary(a, b, "where");
  RINGLET_CHECK(cond.dtype() == DType::u8, DTypeError, "where: condition must be u8, got ",
                cond.dtype(), " ", shape_str(cond.shape()));
  const Shape shape =
      broadcast_shapes(cond.shape(), broadcast_shapes(a.shape(), b.shape(), "where"), "where");
  Tensor out = Tensor::empty(shape, a.dtype(), a.device());
  if (!out.device().is_cpu()) {
    kernels_for(out.device())
        .where(kernel_view(out), kernel_view(cond, shape), kernel_view(a, shape),
               kernel_view(b, shape), stream_for(out.device()));
  } else {
    where_cpu(out, cond, a, b);
  }
  return record(
      "where", out, {a, b},
      [cond, sa = a.shape(), sb = b.shape()](const Tensor& g, const std::vector<bool>& n) {
        const Tensor zero = zeros({}, g.dtype(), g.device());
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
  if (!a.device().is_cpu()) {
    kernels_for(a.device()).fill(kernel_view(a), value, stream_for(a.device()));
    return a;
  }
  cpu::dispatch_all(a.dtype(), [&]<class T>() {
    const T v = cpu::convert<T>(value);
    map_kernel<T, T, 0>(a, {}, [v]() { return v; });
  });
  return a;
}

Tensor& zero_(Tensor& a) { return fill_(a, 0.0); }

Tensor& copy_(Tensor& dst, const Tensor& src) {
  check_inplace(dst, "copy");
  const Shape shape = broadcast_shapes(dst.shape(), src.shape(), "copy_");
  RINGLET_CHECK(shape == dst.shape(), ShapeError, "copy_: source of shape ", shape_str(src.shape()),
                " does not broadcast to the destination's shape ", shape_str(dst.shape()));
  if (dst.device() != src.device()) {
    if (src.device().is_cpu() && dst.is_contiguous() && src.shape() == dst.shape() &&
        src.dtype() == dst.dtype()) {
      upload_into(src, dst);  // straight into place: one copy on the stream
      return dst;
    }
    // Across devices: move the source over first (a staged, stream-ordered transfer).
    const Tensor moved = src.to(dst.device());
    return copy_(dst, moved);
  }
  if (!dst.device().is_cpu()) {
    kernels_for(dst.device())
        .copy(kernel_view(dst), kernel_view(src, shape), stream_for(dst.device()));
    return dst;
  }
  cpu::copy(dst, broadcast_view(src, shape));
  return dst;
}

Tensor& add_scaled_(Tensor& a, const Tensor& b, double alpha) {
  check_inplace(a, "add_scaled");
  check_binary(a, b, "add_scaled_");
  RINGLET_CHECK(broadcast_shapes(a.shape(), b.shape(), "add_scaled_") == a.shape(), ShapeError,
                "add_scaled_: operand of shape ", shape_str(b.shape()),
                " does not broadcast to the target's shape ", shape_str(a.shape()));
  if (!a.device().is_cpu()) {
    kernels_for(a.device())
        .add_scaled(kernel_view(a), kernel_view(a), kernel_view(b, a.shape()), alpha,
                    stream_for(a.device()));
    return a;
  }
  cpu::dispatch_floating(a.dtype(), "add_scaled_", [&]<class T>() {
    map_kernel<T, T, 2>(a, {a, b}, kernels::AddScaledFn<T>{static_cast<T>(alpha)});
  });
  return a;
}

}  // namespace ringlet::tensor
