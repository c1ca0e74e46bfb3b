// Reductions (sum, mean, var, max/min, argmax) and the softmax family on CPU, with their
// backward rules. Kernels read inputs through their strides (no copies): sums accumulate
// through a stride-0 view of the output; dim-wise ops walk "lanes", one per position of the
// other dims. Floating sums accumulate in double, integer sums in int64 (returned as i64).
#include "tensor/ops/reduce.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "tensor/autograd.h"
#include "tensor/cpu/dispatch.h"
#include "tensor/cpu/loops.h"
#include "tensor/ops/creation.h"
#include "tensor/ops/device_dispatch.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/movement.h"

namespace ringlet::tensor {
namespace {

using Offsets1 = std::array<std::int64_t, 1>;
using Offsets2 = std::array<std::int64_t, 2>;
using Offsets3 = std::array<std::int64_t, 3>;

void require_floating(const Tensor& t, const char* op) {
  RINGLET_CHECK(t.dtype() == DType::f32 || t.dtype() == DType::f64, DTypeError, op, ": dtype ",
                t.dtype(), " is not supported (f32 and f64 are); input shape ",
                shape_str(t.shape()));
}

// Which dims a reduction covers: an empty list means all; negative dims wrap; a 0-d tensor
// accepts dim 0 / -1 (as PyTorch). A repeated dim is an error.
std::vector<bool> reduced_mask(const Tensor& t, const Shape& dims, const char* op) {
  std::vector<bool> mask(t.dim(), dims.empty());
  std::vector<bool> seen(std::max<std::int64_t>(t.dim(), 1), false);
  for (const auto dim : dims) {
    const std::int64_t d = wrap_dim(dim, t.dim(), op);
    RINGLET_CHECK(!seen[d], ValueError, op, ": dim ", dim, " appears more than once in ",
                  shape_str(dims));
    seen[d] = true;
    if (t.dim() > 0) mask[d] = true;
  }
  return mask;
}

Shape reduced_shape(const Shape& shape, const std::vector<bool>& mask, bool keepdim) {
  Shape out;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (!mask[i]) {
      out.push_back(shape[i]);
    } else if (keepdim) {
      out.push_back(1);
    }
  }
  return out;
}

std::int64_t reduced_count(const Shape& shape, const std::vector<bool>& mask) {
  std::int64_t n = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (mask[i]) n *= shape[i];
  }
  return n;
}

// A contiguous tensor allocated with the keepdim shape, seen with `shape` (same layout).
Tensor as_shape(const Tensor& contiguous_out, const Shape& shape) {
  return Tensor::make_view(contiguous_out.storage(), shape, contiguous_strides(shape),
                           contiguous_out.offset(), contiguous_out.dtype());
}

// A reduction's output gradient broadcast back over the input shape (a stride-0 view).
Tensor expand_back(const Tensor& g, const Shape& in_shape, const std::vector<bool>& mask) {
  return expand(g.reshape(reduced_shape(in_shape, mask, true)), in_shape);
}

// acc[j] += t over every reduced position, where j indexes the keepdim output contiguously.
template <class T, class Acc>
std::vector<Acc> accumulate(const Tensor& t, const std::vector<bool>& mask) {
  const Shape keep_shape = reduced_shape(t.shape(), mask, true);
  Shape acc_strides = contiguous_strides(keep_shape);
  for (std::size_t i = 0; i < mask.size(); ++i) {
    if (mask[i]) acc_strides[i] = 0;
  }
  std::vector<Acc> acc(static_cast<std::size_t>(shape_numel(keep_shape)), Acc{0});
  const T* in = t.data<T>();
  if (!mask.empty() && mask.back()) {
    // The innermost dim is reduced: one dependent add per element would be latency-bound,
    // so each run along it is summed with four independent partial sums.
    const Shape outer(t.shape().begin(), t.shape().end() - 1);
    const Shape outer_acc(acc_strides.begin(), acc_strides.end() - 1);
    const Shape outer_in(t.strides().begin(), t.strides().end() - 1);
    const std::int64_t length = t.shape().back(), step = t.strides().back();
    cpu::for_each_offset<2>(outer, {&outer_acc, &outer_in}, [&](const Offsets2& off) {
      const T* run = in + off[1];
      Acc part[4] = {0, 0, 0, 0};
      std::int64_t i = 0;
      for (; i + 4 <= length; i += 4) {
        for (int u = 0; u < 4; ++u) part[u] += static_cast<Acc>(run[(i + u) * step]);
      }
      for (; i < length; ++i) part[0] += static_cast<Acc>(run[i * step]);
      acc[off[0]] += (part[0] + part[1]) + (part[2] + part[3]);
    });
    return acc;
  }
  cpu::for_each_offset<2>(t.shape(), {&acc_strides, &t.strides()}, [&](const Offsets2& off) {
    acc[off[0]] += static_cast<Acc>(in[off[1]]);
  });
  return acc;
}

// --- dim-wise ops walk lanes: every position of the other dims, then `length` steps along
// the dim. A 0-d tensor is one lane of length 1.
std::int64_t lane_length(const Tensor& t, std::int64_t d) { return t.dim() ? t.size(d) : 1; }
std::int64_t lane_stride(const Tensor& t, std::int64_t d) { return t.dim() ? t.stride(d) : 0; }

Shape without(const Shape& s, std::int64_t d) {
  Shape out = s;
  if (d < static_cast<std::int64_t>(out.size())) out.erase(out.begin() + d);
  return out;
}

// fn(offsets) once per lane with the lane's start offset in each of K tensors of the same
// (full) shape, given their strides.
template <std::size_t K, class F>
void for_each_lane(const Shape& shape, std::int64_t d, const std::array<const Shape*, K>& strides,
                   F&& fn) {
  std::array<Shape, K> lane_strides;
  std::array<const Shape*, K> ptrs;
  for (std::size_t k = 0; k < K; ++k) {
    lane_strides[k] = without(*strides[k], d);
    ptrs[k] = &lane_strides[k];
  }
  cpu::for_each_offset<K>(without(shape, d), ptrs, fn);
}

// `v` replaces `best` as the max (kMax) or min: NaN wins (it propagates, as in PyTorch) and
// the first of equal values is kept.
template <bool kMax, class T>
bool better(T v, T best) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(v)) return !std::isnan(best);
  }
  return kMax ? v > best : v < best;
}

template <class T>
bool same_value(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a)) return std::isnan(b);
  }
  return a == b;
}

// The full max/min on a device: one lane over the flattened input; the gradient is shared
// evenly by the elements equal to it (NaN counting as equal to a NaN result), as on the CPU.
template <bool kMax>
Tensor extreme_all_device(const Tensor& t) {
  const Tensor x = t.detach().contiguous();
  Tensor out = Tensor::empty({}, x.dtype(), x.device());
  Tensor index = Tensor::empty({}, DType::i64, x.device());
  kernels_for(x.device())
      .extreme(x.dtype(), kMax, kernels::Lanes{1, x.numel(), 1}, x.raw_data(), out.raw_data(),
               static_cast<std::int64_t*>(index.raw_data()), stream_for(x.device()));
  return record(kMax ? "MaxBackward" : "MinBackward", out, {t},
                [x, value = out.detach()](const Tensor& g, const std::vector<bool>&) {
                  const Tensor chosen = where(ne(value, value), ne(x, x), eq(x, value));
                  const Tensor mask = chosen.to(g.dtype());
                  return std::vector<Tensor>{mul(mask, div(g, sum(mask)))};
                });
}

template <bool kMax>
Tensor extreme_all(const Tensor& t, const char* op) {
  RINGLET_CHECK(t.numel() > 0, ValueError, op, ": the input of shape ", shape_str(t.shape()),
                " is empty; there is no ", op, " to take");
  if (!t.device().is_cpu()) return extreme_all_device<kMax>(t);
  Tensor out = Tensor::empty({}, t.dtype());
  cpu::dispatch_numeric(t.dtype(), op, [&]<class T>() {
    const T* in = t.data<T>();
    T best = in[0];
    cpu::for_each_offset<1>(t.shape(), {&t.strides()}, [&](const Offsets1& off) {
      if (better<kMax>(in[off[0]], best)) best = in[off[0]];
    });
    *out.data<T>() = best;
  });
  const Tensor x = t.detach();
  const Tensor value = out.detach();
  // Ties share the gradient evenly (as PyTorch's full max/min).
  return record(kMax ? "MaxBackward" : "MinBackward", out, {t},
                [x, value](const Tensor& g, const std::vector<bool>&) {
                  Tensor grad = zeros(x.shape(), x.dtype());
                  cpu::dispatch_floating(x.dtype(), "max/min backward", [&]<class T>() {
                    const T* in = x.data<T>();
                    const T target = *value.data<T>();
                    T* dst = grad.data<T>();
                    const Shape dst_strides = grad.strides();
                    std::int64_t ties = 0;
                    cpu::for_each_offset<1>(x.shape(), {&x.strides()}, [&](const Offsets1& off) {
                      if (same_value(in[off[0]], target)) ++ties;
                    });
                    const T share = static_cast<T>(g.item() / static_cast<double>(ties));
                    cpu::for_each_offset<2>(x.shape(), {&x.strides(), &dst_strides},
                                            [&](const Offsets2& off) {
                                              if (same_value(in[off[0]], target)) {
                                                dst[off[1]] = share;
                                              }
                                            });
                  });
                  return std::vector<Tensor>{grad};
                });
}

// Values and i64 indices of the max (kMax) or min along dim, in the keepdim layout.
// A contiguous tensor of `shape` seen as lanes along d ([outer, length, inner]).
kernels::Lanes lanes_of(const Shape& shape, std::int64_t d) {
  kernels::Lanes l{1, 1, 1};
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const auto k = static_cast<std::int64_t>(i);
    if (k < d) l.outer *= shape[i];
    if (k == d) l.length = shape[i];
    if (k > d) l.inner *= shape[i];
  }
  return l;
}

template <bool kMax>
std::pair<Tensor, Tensor> extreme_dim(const Tensor& t, std::int64_t dim, const char* op) {
  const std::int64_t d = wrap_dim(dim, t.dim(), op);
  const std::int64_t length = lane_length(t, d);
  RINGLET_CHECK(length > 0, ValueError, op, ": dim ", dim, " of the input of shape ",
                shape_str(t.shape()), " has size 0; there is no ", op, " to take");
  Shape keep_shape = t.shape();
  if (t.dim() > 0) keep_shape[d] = 1;
  if (!t.device().is_cpu()) {
    const Tensor x = t.contiguous();
    Tensor values = Tensor::empty(keep_shape, t.dtype(), t.device());
    Tensor indices = Tensor::empty(keep_shape, DType::i64, t.device());
    kernels_for(t.device())
        .extreme(t.dtype(), kMax, lanes_of(x.shape(), d), x.raw_data(), values.raw_data(),
                 static_cast<std::int64_t*>(indices.raw_data()), stream_for(t.device()));
    return {values, indices};
  }
  Tensor values = Tensor::empty(keep_shape, t.dtype());
  Tensor indices = Tensor::empty(keep_shape, DType::i64);
  const std::int64_t step = lane_stride(t, d);
  cpu::dispatch_numeric(t.dtype(), op, [&]<class T>() {
    const T* in = t.data<T>();
    T* out_v = values.data<T>();
    std::int64_t* out_i = indices.data<std::int64_t>();
    for_each_lane<2>(t.shape(), d, {&t.strides(), &values.strides()}, [&](const Offsets2& off) {
      T best = in[off[0]];
      std::int64_t at = 0;
      for (std::int64_t i = 1; i < length; ++i) {
        const T v = in[off[0] + i * step];
        if (better<kMax>(v, best)) {
          best = v;
          at = i;
        }
      }
      out_v[off[1]] = best;
      out_i[off[1]] = at;
    });
  });
  return {values, indices};
}

// out (keepdim shape, contiguous) = the sum of t over the masked dims, on the host.
void sum_cpu(const Tensor& out, const Tensor& t, const std::vector<bool>& mask) {
  cpu::dispatch_numeric(t.dtype(), "sum", [&]<class T>() {
    if constexpr (std::is_floating_point_v<T>) {
      const auto acc = accumulate<T, double>(t, mask);
      T* dst = out.data<T>();
      for (std::size_t i = 0; i < acc.size(); ++i) dst[i] = static_cast<T>(acc[i]);
    } else {
      const auto acc = accumulate<T, std::int64_t>(t, mask);
      std::copy(acc.begin(), acc.end(), out.data<std::int64_t>());
    }
  });
}

}  // namespace

Tensor sum(const Tensor& t, const Shape& dims, bool keepdim) {
  const auto mask = reduced_mask(t, dims, "sum");
  const Shape keep_shape = reduced_shape(t.shape(), mask, true);
  const DType out_dtype = core::is_floating(t.dtype()) ? t.dtype() : DType::i64;
  Tensor out = Tensor::empty(keep_shape, out_dtype, t.device());
  if (!t.device().is_cpu()) {
    kernels_for(t.device()).sum(kernel_view(out), kernel_view(t), 1.0, stream_for(t.device()));
  } else {
    sum_cpu(out, t, mask);
  }
  out = as_shape(out, reduced_shape(t.shape(), mask, keepdim));
  return record("SumBackward", out, {t},
                [in_shape = t.shape(), mask](const Tensor& g, const std::vector<bool>&) {
                  return std::vector<Tensor>{expand_back(g, in_shape, mask)};
                });
}

Tensor mean(const Tensor& t, const Shape& dims, bool keepdim) {
  const auto mask = reduced_mask(t, dims, "mean");
  require_floating(t, "mean");
  // An empty reduction divides 0 by 0: NaN, as in PyTorch.
  const auto count = static_cast<double>(reduced_count(t.shape(), mask));
  Tensor out = Tensor::empty(reduced_shape(t.shape(), mask, true), t.dtype(), t.device());
  if (!t.device().is_cpu()) {
    kernels_for(t.device()).sum(kernel_view(out), kernel_view(t), count, stream_for(t.device()));
  } else {
    cpu::dispatch_floating(t.dtype(), "mean", [&]<class T>() {
      const auto acc = accumulate<T, double>(t, mask);
      T* dst = out.data<T>();
      for (std::size_t i = 0; i < acc.size(); ++i) dst[i] = static_cast<T>(acc[i] / count);
    });
  }
  out = as_shape(out, reduced_shape(t.shape(), mask, keepdim));
  return record("MeanBackward", out, {t},
                [in_shape = t.shape(), mask, count](const Tensor& g, const std::vector<bool>&) {
                  return std::vector<Tensor>{expand_back(mul(g, 1.0 / count), in_shape, mask)};
                });
}

Tensor var(const Tensor& t, const Shape& dims, bool unbiased, bool keepdim) {
  const auto mask = reduced_mask(t, dims, "var");
  require_floating(t, "var");  // composed of ops: the same on every device
  // Two passes (mean, then squared deviations) for accuracy. With no degrees of freedom left
  // the divisor is 0 and the result NaN, as in PyTorch.
  const std::int64_t n = reduced_count(t.shape(), mask);
  const auto divisor = static_cast<double>(std::max<std::int64_t>(n - (unbiased ? 1 : 0), 0));
  const Tensor x = t.detach();
  Tensor out;
  {
    NoGradGuard no_grad;
    const Tensor dev = sub(x, mean(x, dims, true));
    out = div(sum(mul(dev, dev), dims, keepdim), divisor);
  }
  return record("VarBackward", out, {t},
                [x, dims, mask, divisor](const Tensor& g, const std::vector<bool>&) {
                  const Tensor dev = sub(x, mean(x, dims, true));
                  const Tensor scale = expand_back(mul(g, 2.0 / divisor), x.shape(), mask);
                  return std::vector<Tensor>{mul(dev, scale)};
                });
}

Tensor max(const Tensor& t) { return extreme_all<true>(t, "max"); }
Tensor min(const Tensor& t) { return extreme_all<false>(t, "min"); }

namespace {

// Values/indices from extreme_dim, shaped for keepdim, with the gradient routed to the
// selected element of each lane.
std::pair<Tensor, Tensor> finish_extreme(const Tensor& t, std::int64_t dim, bool keepdim,
                                         std::pair<Tensor, Tensor> result, const char* name) {
  auto [values, indices] = std::move(result);
  const std::int64_t d = wrap_dim(dim, t.dim(), name);
  Shape out_shape = t.dim() ? without(t.shape(), d) : Shape{};
  if (keepdim) out_shape = values.shape();
  const Tensor keep_indices = indices;
  values = as_shape(values, out_shape);
  indices = as_shape(indices, out_shape);
  values = record(
      name, values, {t},
      [in_shape = t.shape(), d, keep_indices](const Tensor& g, const std::vector<bool>&) {
        if (!g.device().is_cpu()) {
          // Each lane's gradient goes to its selected element: a gather's adjoint.
          const Tensor gk = g.reshape(keep_indices.shape()).contiguous();
          Tensor grad = Tensor::empty(in_shape, gk.dtype(), gk.device());
          kernels_for(gk.device())
              .gather_backward(gk.dtype(), kernel_view(grad), static_cast<int>(d),
                               kernel_view(keep_indices), gk.raw_data(), stream_for(gk.device()));
          return std::vector<Tensor>{grad};
        }
        Tensor grad = zeros(in_shape, g.dtype());
        const Tensor g_keep = g.reshape(keep_indices.shape());
        const std::int64_t step = lane_stride(grad, d);
        cpu::dispatch_floating(g.dtype(), "max/min backward", [&]<class T>() {
          T* dst = grad.data<T>();
          const T* src = g_keep.data<T>();
          const std::int64_t* at = keep_indices.data<std::int64_t>();
          for_each_lane<3>(
              in_shape, d, {&grad.strides(), &g_keep.strides(), &keep_indices.strides()},
              [&](const Offsets3& off) { dst[off[0] + at[off[2]] * step] = src[off[1]]; });
        });
        return std::vector<Tensor>{grad};
      });
  return {values, indices};
}

}  // namespace

std::pair<Tensor, Tensor> max(const Tensor& t, std::int64_t dim, bool keepdim) {
  return finish_extreme(t, dim, keepdim, extreme_dim<true>(t, dim, "max"), "MaxDimBackward");
}

std::pair<Tensor, Tensor> min(const Tensor& t, std::int64_t dim, bool keepdim) {
  return finish_extreme(t, dim, keepdim, extreme_dim<false>(t, dim, "min"), "MinDimBackward");
}

Tensor argmax(const Tensor& t, std::int64_t dim, bool keepdim) {
  Tensor indices = extreme_dim<true>(t, dim, "argmax").second;
  if (keepdim || t.dim() == 0) return indices;
  return as_shape(indices, without(t.shape(), wrap_dim(dim, t.dim(), "argmax")));
}

namespace {

// Softmax (kLog = false) or log-softmax of every lane along d into a contiguous output.
// Numerically stable: the lane's max is subtracted before exponentiating.
template <bool kLog>
Tensor softmax_forward(const Tensor& t, std::int64_t d, const char* op) {
  Tensor out = Tensor::empty(t.shape(), t.dtype());
  const std::int64_t length = lane_length(t, d);
  const std::int64_t in_step = lane_stride(t, d);
  const std::int64_t out_step = lane_stride(out, d);
  cpu::dispatch_floating(t.dtype(), op, [&]<class T>() {
    const T* in = t.data<T>();
    T* dst = out.data<T>();
    for_each_lane<2>(t.shape(), d, {&t.strides(), &out.strides()}, [&](const Offsets2& off) {
      T top = -std::numeric_limits<T>::infinity();
      for (std::int64_t i = 0; i < length; ++i) top = std::max(top, in[off[0] + i * in_step]);
      // A lane of all -inf would give NaN from -inf - -inf; PyTorch gives NaN too.
      double total = 0.0;
      for (std::int64_t i = 0; i < length; ++i) {
        const T shifted = in[off[0] + i * in_step] - top;
        const T e = std::exp(shifted);
        total += e;
        dst[off[1] + i * out_step] = kLog ? shifted : e;
      }
      const T log_total = static_cast<T>(std::log(total));
      const T inv_total = static_cast<T>(1.0 / total);
      for (std::int64_t i = 0; i < length; ++i) {
        T& y = dst[off[1] + i * out_step];
        y = kLog ? y - log_total : y * inv_total;
      }
    });
  });
  return out;
}

// dx = y * (g - <g, y>) for softmax; dx = g - exp(y) * sum(g) for log-softmax, per lane.
template <bool kLog>
Tensor softmax_backward(const Tensor& g, const Tensor& y, std::int64_t d) {
  Tensor grad = Tensor::empty(y.shape(), y.dtype());
  const std::int64_t length = lane_length(y, d);
  const std::int64_t g_step = lane_stride(g, d);
  const std::int64_t y_step = lane_stride(y, d);
  const std::int64_t out_step = lane_stride(grad, d);
  cpu::dispatch_floating(y.dtype(), "softmax backward", [&]<class T>() {
    const T* gp = g.data<T>();
    const T* yp = y.data<T>();
    T* dst = grad.data<T>();
    for_each_lane<3>(y.shape(), d, {&g.strides(), &y.strides(), &grad.strides()},
                     [&](const Offsets3& off) {
                       double total = 0.0;
                       for (std::int64_t i = 0; i < length; ++i) {
                         const T gi = gp[off[0] + i * g_step];
                         total += kLog ? gi : gi * yp[off[1] + i * y_step];
                       }
                       const auto s = static_cast<T>(total);
                       for (std::int64_t i = 0; i < length; ++i) {
                         const T gi = gp[off[0] + i * g_step];
                         const T yi = yp[off[1] + i * y_step];
                         dst[off[2] + i * out_step] = kLog ? gi - std::exp(yi) * s : yi * (gi - s);
                       }
                     });
  });
  return grad;
}

// Softmax on a device: one thread per lane of the contiguous input, the CPU's steps.
template <bool kLog>
Tensor softmax_device(const Tensor& t, std::int64_t d, const char* node) {
  const Tensor x = t.contiguous();
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  kernels_for(x.device())
      .softmax(x.dtype(), kLog, lanes_of(x.shape(), d), x.raw_data(), out.raw_data(),
               stream_for(x.device()));
  return record(node, out, {t}, [y = out.detach(), d](const Tensor& g, const std::vector<bool>&) {
    const Tensor gc = g.contiguous();
    Tensor grad = Tensor::empty(y.shape(), y.dtype(), y.device());
    kernels_for(y.device())
        .softmax_backward(y.dtype(), kLog, lanes_of(y.shape(), d), gc.raw_data(), y.raw_data(),
                          grad.raw_data(), stream_for(y.device()));
    return std::vector<Tensor>{grad};
  });
}

template <bool kLog>
Tensor softmax_op(const Tensor& t, std::int64_t dim, const char* op, const char* node) {
  const std::int64_t d = wrap_dim(dim, t.dim(), op);
  require_floating(t, op);
  if (!t.device().is_cpu()) return softmax_device<kLog>(t, d, node);
  Tensor out = softmax_forward<kLog>(t, d, op);
  return record(node, out, {t}, [y = out.detach(), d](const Tensor& g, const std::vector<bool>&) {
    return std::vector<Tensor>{softmax_backward<kLog>(g, y, d)};
  });
}

}  // namespace

Tensor softmax(const Tensor& t, std::int64_t dim) {
  return softmax_op<false>(t, dim, "softmax", "SoftmaxBackward");
}

Tensor log_softmax(const Tensor& t, std::int64_t dim) {
  return softmax_op<true>(t, dim, "log_softmax", "LogSoftmaxBackward");
}

}  // namespace ringlet::tensor
