// matmul (torch.matmul semantics) and linear on CPU through cpu::gemm, with backward rules.
// Each matrix operand is handed to GEMM as stored when its last two dims are row-major, or as
// a transpose when they are column-major (e.g. w.transpose(0, 1)); only other layouts (an
// expanded or sliced matrix) are copied. Batch dims broadcast; a batch against a single matrix
// is folded into one GEMM over all rows.
#include "tensor/ops/matmul.h"

#include <algorithm>
#include <optional>

#include "tensor/autograd.h"
#include "tensor/cpu/blas.h"
#include "tensor/cpu/dispatch.h"
#include "tensor/cpu/loops.h"
#include "tensor/math_mode.h"
#include "tensor/ops/creation.h"
#include "tensor/ops/device_dispatch.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/movement.h"
#include "tensor/ops/reduce.h"

namespace ringlet::tensor {
namespace {

// Same dtype (f32 or f64) and device for every defined operand.
void check_operands(const char* op, const Tensor& a, const Tensor& b, const Tensor& c = {}) {
  for (const Tensor* t : {&a, &b, &c}) {
    if (!t->defined()) continue;
    RINGLET_CHECK(t->dtype() == a.dtype(), DTypeError, op, ": dtypes differ: ", a.dtype(),
                  " (shape ", shape_str(a.shape()), ") and ", t->dtype(), " (shape ",
                  shape_str(t->shape()), ")");
    RINGLET_CHECK(t->device() == a.device(), DeviceError, op, ": operands on ", a.device(), " and ",
                  t->device());
  }
  RINGLET_CHECK(a.dtype() == DType::f32 || a.dtype() == DType::f64, DTypeError, op, ": dtype ",
                a.dtype(), " is not supported (f32 and f64 are)");
}

// A fresh contiguous tensor seen with another shape of the same size.
Tensor as_shape(const Tensor& t, const Shape& shape) {
  return Tensor::make_view(t.storage(), shape, contiguous_strides(shape), t.offset(), t.dtype());
}

Shape batch_of(const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); }

// The broadcast of x's and y's batch dims (all but the last two), if they broadcast.
std::optional<Shape> broadcast_batch(const Tensor& x, const Tensor& y) {
  const Shape a = batch_of(x), b = batch_of(y);
  const std::size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t da = i + a.size() < n ? 1 : a[i + a.size() - n];
    const std::int64_t db = i + b.size() < n ? 1 : b[i + b.size() - n];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Shape with_matrix(Shape batch, std::int64_t rows, std::int64_t cols) {
  batch.push_back(rows);
  batch.push_back(cols);
  return batch;
}

// How GEMM reads a matrix: as stored (row-major with row stride ld) or as the transpose of a
// row-major matrix (column-major, column stride ld); nullopt when it is neither.
struct MatrixLayout {
  bool transposed;
  std::int64_t ld;
};

std::optional<MatrixLayout> gemm_layout(const Tensor& t) {
  const std::int64_t rows = t.size(-2), cols = t.size(-1);
  const std::int64_t row_stride = t.stride(-2), col_stride = t.stride(-1);
  if ((cols <= 1 || col_stride == 1) &&
      (rows <= 1 || row_stride >= std::max<std::int64_t>(cols, 1))) {
    return MatrixLayout{false, rows <= 1 ? std::max<std::int64_t>(cols, 1) : row_stride};
  }
  if ((rows <= 1 || row_stride == 1) &&
      (cols <= 1 || col_stride >= std::max<std::int64_t>(rows, 1))) {
    return MatrixLayout{true, cols <= 1 ? std::max<std::int64_t>(rows, 1) : col_stride};
  }
  return std::nullopt;
}

// Strides that walk `batch` over t's batch dims (right-aligned; 0 where t broadcasts).
Shape batch_strides(const Tensor& t, const Shape& batch) {
  Shape strides(batch.size(), 0);
  const std::size_t t_batch = static_cast<std::size_t>(t.dim()) - 2;
  const std::size_t lead = batch.size() - t_batch;
  for (std::size_t i = 0; i < t_batch; ++i) {
    if (t.shape()[i] != 1) strides[lead + i] = t.strides()[i];
  }
  return strides;
}

// x [..., m, k] @ y [..., k, n] -> contiguous [batch..., m, n]. Both at least 2-D with the same
// dtype, inner sizes equal and batch dims broadcastable (the callers check). Not recorded.
Tensor product(Tensor x, Tensor y) {
  const std::int64_t m = x.size(-2), k = x.size(-1), n = y.size(-1);
  if (y.dim() == 2 && x.dim() > 2 && x.is_contiguous()) {
    const Tensor rows = as_shape(x, {shape_numel(batch_of(x)) * m, k});
    return as_shape(product(rows, y), with_matrix(batch_of(x), m, n));
  }
  auto lx = gemm_layout(x);
  if (!lx) {
    x = x.contiguous();
    lx = gemm_layout(x);
  }
  auto ly = gemm_layout(y);
  if (!ly) {
    y = y.contiguous();
    ly = gemm_layout(y);
  }
  const Shape batch = *broadcast_batch(x, y);
  Tensor out = Tensor::empty(with_matrix(batch, m, n), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  // An empty inner dimension: a sum of no products. The operands may hold no storage at all.
  if (k == 0) return fill_(out, 0.0);
  const Shape x_strides = batch_strides(x, batch);
  const Shape y_strides = batch_strides(y, batch);
  const Shape out_strides = batch_strides(out, batch);
  if (!out.device().is_cpu()) {
    // One GEMM per matrix of the batch, each queued on the device's current stream.
    auto& kernels = kernels_for(out.device());
    const auto es = static_cast<std::int64_t>(core::dtype_size(x.dtype()));
    const auto* px = static_cast<const char*>(x.raw_data());
    const auto* py = static_cast<const char*>(y.raw_data());
    auto* pout = static_cast<char*>(out.raw_data());
    cpu::for_each_offset<3>(batch, {&x_strides, &y_strides, &out_strides},
                            [&](const std::array<std::int64_t, 3>& off) {
                              kernels.gemm(x.dtype(), lx->transposed, ly->transposed, m, n, k,
                                           px + off[0] * es, lx->ld, py + off[1] * es, ly->ld, 0.0,
                                           pout + off[2] * es, n, stream_for(out.device()));
                            });
    return out;
  }
  cpu::dispatch_floating(x.dtype(), "matmul", [&]<class T>() {
    const T* px = x.data<T>();
    const T* py = y.data<T>();
    T* pout = out.data<T>();
    cpu::for_each_offset<3>(batch, {&x_strides, &y_strides, &out_strides},
                            [&](const std::array<std::int64_t, 3>& off) {
                              cpu::gemm(lx->transposed, ly->transposed, m, n, k, T(1), px + off[0],
                                        lx->ld, py + off[1], ly->ld, T(0), pout + off[2], n);
                            });
  });
  return out;
}

Tensor transposed(const Tensor& t) { return t.transpose(-1, -2); }

// torch.matmul's promotion: a 1-D left operand is a row [1, k], a 1-D right one a column [k, 1].
Tensor promote(const Tensor& t, bool left) {
  if (t.dim() != 1) return t;
  return t.reshape(left ? Shape{1, t.size(0)} : Shape{t.size(0), 1});
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  RINGLET_CHECK(a.dim() >= 1 && b.dim() >= 1, ShapeError,
                "matmul: both operands need at least one dim, got shapes ", shape_str(a.shape()),
                " and ", shape_str(b.shape()));
  check_operands("matmul", a, b);
  const Tensor a2 = promote(a.detach(), true);
  const Tensor b2 = promote(b.detach(), false);
  RINGLET_CHECK(a2.size(-1) == b2.size(-2), ShapeError, "matmul: shapes ", shape_str(a.shape()),
                " and ", shape_str(b.shape()), " cannot be multiplied (", a2.size(-1),
                " != ", b2.size(-2), ")");
  const auto batch = broadcast_batch(a2, b2);
  RINGLET_CHECK(batch.has_value(), ShapeError, "matmul: the batch dims of shapes ",
                shape_str(a.shape()), " and ", shape_str(b.shape()),
                " cannot be broadcast together");
  // The dims that 1-D promotion added are removed again.
  Shape out_shape = *batch;
  if (a.dim() > 1) out_shape.push_back(a2.size(-2));
  if (b.dim() > 1) out_shape.push_back(b2.size(-1));
  const Tensor out = as_shape(product(a2, b2), out_shape);
  return record("MatmulBackward", out, {a, b},
                [a2, b2, a_shape = a.shape(), b_shape = b.shape(), batch = *batch](
                    const Tensor& g, const std::vector<bool>& needs) {
                  const Tensor g2 = g.reshape(with_matrix(batch, a2.size(-2), b2.size(-1)));
                  Tensor ga, gb;
                  if (needs[0]) {
                    ga = sum_to(product(g2, transposed(b2)), a2.shape()).reshape(a_shape);
                  }
                  if (needs[1]) {
                    if (b2.dim() == 2 && a2.dim() > 2) {
                      // Sum over the batch inside one GEMM: A_rows^T @ G_rows.
                      const std::int64_t k = a2.size(-1), n = b2.size(-1);
                      const Tensor a_rows = a2.reshape({shape_numel(batch) * a2.size(-2), k});
                      const Tensor g_rows = g2.reshape({a_rows.size(0), n});
                      gb = product(transposed(a_rows), g_rows).reshape(b_shape);
                    } else {
                      gb = sum_to(product(transposed(a2), g2), b2.shape()).reshape(b_shape);
                    }
                  }
                  return std::vector<Tensor>{ga, gb};
                });
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  return linear(x, weight, bias, Activation::none);
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, Activation act) {
  RINGLET_CHECK(weight.dim() == 2, ShapeError, "linear: weight must be 2-D [out, in], got shape ",
                shape_str(weight.shape()));
  RINGLET_CHECK(x.dim() >= 1 && x.size(-1) == weight.size(1), ShapeError, "linear: input of shape ",
                shape_str(x.shape()), " does not match weight of shape ", shape_str(weight.shape()),
                " (expected ", weight.size(1), " input features)");
  const std::int64_t in = weight.size(1), out_features = weight.size(0);
  if (bias.defined()) {
    RINGLET_CHECK(bias.dim() == 1 && bias.size(0) == out_features, ShapeError,
                  "linear: bias of shape ", shape_str(bias.shape()),
                  " does not match weight of shape ", shape_str(weight.shape()), " (expected [",
                  out_features, "])");
  }
  check_operands("linear", x, weight, bias);
  const bool on_device = !x.device().is_cpu();
  if (!on_device && act == Activation::relu) return relu(linear(x, weight, bias));
  const std::int64_t rows = shape_numel(Shape(x.shape().begin(), x.shape().end() - 1));
  const Tensor x_rows = x.detach().reshape({rows, in});
  const Tensor w = weight.detach();
  Tensor out = product(x_rows, transposed(w));
  if (on_device) {
    // The bias over the rows and the activation, in one epilogue kernel.
    const Tensor b = bias.defined() ? bias.detach().contiguous() : Tensor();
    kernels_for(out.device())
        .bias_act(out.dtype(), rows, out_features, 1, b.defined() ? b.raw_data() : nullptr,
                  out.raw_data(), act, stream_for(out.device()));
  } else if (bias.defined()) {
    const Tensor b = bias.detach().contiguous();
    cpu::dispatch_floating(out.dtype(), "linear", [&]<class T>() {
      T* dst = out.data<T>();
      const T* src = b.data<T>();
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t j = 0; j < out_features; ++j) dst[r * out_features + j] += src[j];
      }
    });
  }
  Shape out_shape(x.shape().begin(), x.shape().end() - 1);
  out_shape.push_back(out_features);
  out = as_shape(out, out_shape);
  // With the ReLU in the kernel, the backward masks the gradient with the output first.
  const Tensor relu_out = act == Activation::relu ? out.detach() : Tensor();
  return record("LinearBackward", out, {x, weight, bias},
                [x_rows, w, x_shape = x.shape(), rows, out_features, relu_out,
                 half = half_operands()](const Tensor& grad, const std::vector<bool>& needs) {
                  const TensorCoreScope math(half);  // the forward's operands, the same math
                  const Tensor g = relu_out.defined() ? relu_gradient(grad, relu_out) : grad;
                  const Tensor g_rows = g.reshape({rows, out_features});
                  Tensor gx, gw, gb;
                  if (needs[0]) gx = product(g_rows, w).reshape(x_shape);
                  if (needs[1]) gw = product(transposed(g_rows), x_rows);
                  if (needs[2]) gb = sum(g_rows, {0});
                  return std::vector<Tensor>{gx, gw, gb};
                });
}

}  // namespace ringlet::tensor
