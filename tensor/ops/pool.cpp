// max_pool2d (with per-plane argmax indices), relu_max_pool2d and avg_pool2d on the CPU, with
// backward rules; the 2x2 stride-2 max pool (the CNNs') by the flat loops (cpu/flat_loops.h).
// Input is [N, C, H, W] or [C, H, W]; every H*W plane is pooled on its own, planes in
// parallel. Output size is floor((H + 2p - k) / s) + 1 (PyTorch's ceil_mode=false). Padding
// is at most half the kernel, so every max window holds a real element and every avg window
// lies inside the padded input: the avg divisor is always kH*kW (count_include_pad).
#include "tensor/ops/pool.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/threads.h"
#include "tensor/autograd.h"
#include "tensor/cpu/dispatch.h"
#include "tensor/cpu/flat_loops.h"
#include "tensor/ops/creation.h"
#include "tensor/ops/device_dispatch.h"
#include "tensor/ops/elementwise.h"

namespace ringlet::tensor {
namespace {

constexpr const char* kMaxOp = "max_pool2d";
constexpr const char* kAvgOp = "avg_pool2d";
// Planes per parallel task: a 14x14 plane is only a few hundred operations.
constexpr std::int64_t kPlaneGrain = 16;

struct PoolGeometry {
  std::int64_t planes, height, width;
  std::int64_t kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
  std::int64_t out_h, out_w;
  Shape out_shape;

  // The window of output (oy, ox), clipped to the real input: rows [y0, y1), cols [x0, x1).
  void window(std::int64_t oy, std::int64_t ox, std::int64_t& y0, std::int64_t& y1,
              std::int64_t& x0, std::int64_t& x1) const {
    const std::int64_t ys = oy * stride_h - pad_h, xs = ox * stride_w - pad_w;
    y0 = std::max<std::int64_t>(ys, 0);
    y1 = std::min(ys + kernel_h, height);
    x0 = std::max<std::int64_t>(xs, 0);
    x1 = std::min(xs + kernel_w, width);
  }
};

PoolGeometry validate(const Tensor& input, const Pool2dOptions& o, const char* op) {
  const Shape& shape = input.shape();
  RINGLET_CHECK(input.dim() == 3 || input.dim() == 4, ShapeError, op,
                ": input must be 3-D [C, H, W] or 4-D [N, C, H, W], got shape ", shape_str(shape));
  for (std::int64_t d = input.dim() - 3; d < input.dim(); ++d) {
    RINGLET_CHECK(shape[d] > 0, ShapeError, op,
                  ": only the batch dim may be empty, got input shape ", shape_str(shape));
  }
  PoolGeometry g{};
  g.height = input.size(-2);
  g.width = input.size(-1);
  g.planes = input.numel() / (g.height * g.width);
  g.kernel_h = o.kernel[0];
  g.kernel_w = o.kernel[1];
  RINGLET_CHECK(g.kernel_h >= 1 && g.kernel_w >= 1, ValueError, op,
                ": kernel size must be >= 1, got ", g.kernel_h, "x", g.kernel_w);
  RINGLET_CHECK(o.stride[0] >= 0 && o.stride[1] >= 0, ValueError, op,
                ": stride must be >= 1 (or 0 for the kernel size), got ", o.stride[0], "x",
                o.stride[1]);
  g.stride_h = o.stride[0] == 0 ? g.kernel_h : o.stride[0];
  g.stride_w = o.stride[1] == 0 ? g.kernel_w : o.stride[1];
  g.pad_h = o.padding[0];
  g.pad_w = o.padding[1];
  RINGLET_CHECK(
      g.pad_h >= 0 && g.pad_w >= 0 && g.pad_h <= g.kernel_h / 2 && g.pad_w <= g.kernel_w / 2,
      ValueError, op, ": padding must be >= 0 and at most half the kernel size, got ", "padding ",
      g.pad_h, "x", g.pad_w, " for kernel ", g.kernel_h, "x", g.kernel_w);
  const std::int64_t padded_h = g.height + 2 * g.pad_h, padded_w = g.width + 2 * g.pad_w;
  RINGLET_CHECK(g.kernel_h <= padded_h && g.kernel_w <= padded_w, ShapeError, op, ": kernel ",
                g.kernel_h, "x", g.kernel_w, " is larger than the padded input ", padded_h, "x",
                padded_w, " (input shape ", shape_str(shape), ")");
  g.out_h = (padded_h - g.kernel_h) / g.stride_h + 1;
  g.out_w = (padded_w - g.kernel_w) / g.stride_w + 1;
  g.out_shape = shape;
  g.out_shape[shape.size() - 2] = g.out_h;
  g.out_shape[shape.size() - 1] = g.out_w;
  return g;
}

// The CNNs' pool, which the level's loop runs (tensor/cpu/flat_loops.h).
bool is_two_by_two(const PoolGeometry& g) {
  return g.kernel_h == 2 && g.kernel_w == 2 && g.stride_h == 2 && g.stride_w == 2 && g.pad_h == 0 &&
         g.pad_w == 0;
}

// Runs fn(plane) for every plane, planes split over threads.
template <class F>
void for_each_plane(const PoolGeometry& g, F&& fn) {
  core::parallel_for(g.planes, kPlaneGrain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t p = begin; p < end; ++p) fn(p);
  });
}

// Strict > keeps the first of tied maxima; a NaN always wins (propagates), as in PyTorch.
template <class T>
inline void consider(T v, std::int64_t at, T& best, std::int64_t& best_at) {
  if (v > best || std::isnan(v)) {
    best = v;
    best_at = at;
  }
}

// The 2x2 stride-2 pool of the CNNs, on relu(x) with `relu`, by the instruction-set level's
// loop (flat_loops.h): the values, and each window's gradient position (u8) for the backward.
template <class T>
void max_forward_2x2(const PoolGeometry& g, const Tensor& x, Tensor& out, Tensor& positions,
                     bool relu) {
  const T* in = x.data<T>();
  T* values = out.data<T>();
  std::uint8_t* position = positions.data<std::uint8_t>();
  const std::int64_t in_plane = g.height * g.width, out_plane = g.out_h * g.out_w;
  const auto pool = cpu::flat_loops().max_pool_2x2[cpu::kFlatRow<T>];
  for_each_plane(g, [&](std::int64_t p) {
    pool(in + p * in_plane, g.width, g.out_h, g.out_w, relu, values + p * out_plane,
         position + p * out_plane);
  });
}

// Its backward: each plane written whole in one pass by the level's loop.
template <class T>
Tensor max_backward_2x2(const PoolGeometry& g, const Shape& input_shape, const Tensor& grad_output,
                        const Tensor& positions) {
  const Tensor go = grad_output.contiguous();
  Tensor grad = Tensor::empty(input_shape, go.dtype());
  const T* src = go.data<T>();
  const std::uint8_t* position = positions.data<std::uint8_t>();
  T* dst = grad.data<T>();
  const std::int64_t in_plane = g.height * g.width, out_plane = g.out_h * g.out_w;
  const auto unpool = cpu::flat_loops().max_unpool_2x2[cpu::kFlatRow<T>];
  for_each_plane(g, [&](std::int64_t p) {
    unpool(dst + p * in_plane, g.height, g.width, src + p * out_plane, position + p * out_plane);
  });
  return grad;
}

// Each maximum's index in its plane from its window's position (max_pool2d_with_indices').
Tensor indices_from_positions(const PoolGeometry& g, const Tensor& positions) {
  Tensor indices = Tensor::empty(g.out_shape, DType::i64);
  const std::uint8_t* position = positions.data<std::uint8_t>();
  std::int64_t* where = indices.data<std::int64_t>();
  const std::int64_t out_plane = g.out_h * g.out_w;
  for_each_plane(g, [&](std::int64_t p) {
    for (std::int64_t i = p * out_plane; i < (p + 1) * out_plane; ++i) {
      const std::int64_t oy = (i - p * out_plane) / g.out_w, ox = (i - p * out_plane) % g.out_w;
      const int k = position[i];
      where[i] = (2 * oy + k / 2) * g.width + 2 * ox + k % 2;
    }
  });
  return indices;
}

// Any other window, one output at a time.
template <class T>
void max_forward(const PoolGeometry& g, const Tensor& x, Tensor& out, Tensor& indices) {
  const T* in = x.data<T>();
  T* values = out.data<T>();
  std::int64_t* where = indices.data<std::int64_t>();
  const std::int64_t in_plane = g.height * g.width, out_plane = g.out_h * g.out_w;
  for_each_plane(g, [&](std::int64_t p) {
    const T* src = in + p * in_plane;
    for (std::int64_t oy = 0; oy < g.out_h; ++oy) {
      for (std::int64_t ox = 0; ox < g.out_w; ++ox) {
        std::int64_t y0, y1, x0, x1;
        g.window(oy, ox, y0, y1, x0, x1);
        T best = -std::numeric_limits<T>::infinity();
        std::int64_t best_at = y0 * g.width + x0;
        for (std::int64_t y = y0; y < y1; ++y) {
          for (std::int64_t xx = x0; xx < x1; ++xx) {
            consider(src[y * g.width + xx], y * g.width + xx, best, best_at);
          }
        }
        const std::int64_t at = p * out_plane + oy * g.out_w + ox;
        values[at] = best;
        where[at] = best_at;
      }
    }
  });
}

template <class T>
Tensor max_backward(const PoolGeometry& g, const Shape& input_shape, const Tensor& grad_output,
                    const Tensor& indices) {
  const Tensor go = grad_output.contiguous();
  Tensor grad = zeros(input_shape, go.dtype());
  const T* src = go.data<T>();
  const std::int64_t* where = indices.data<std::int64_t>();
  T* dst = grad.data<T>();
  const std::int64_t in_plane = g.height * g.width, out_plane = g.out_h * g.out_w;
  for_each_plane(g, [&](std::int64_t p) {
    for (std::int64_t i = p * out_plane; i < (p + 1) * out_plane; ++i) {
      dst[p * in_plane + where[i]] += src[i];
    }
  });
  return grad;
}

template <class T>
void avg_forward(const PoolGeometry& g, const Tensor& x, Tensor& out) {
  const T* in = x.data<T>();
  T* values = out.data<T>();
  const std::int64_t in_plane = g.height * g.width, out_plane = g.out_h * g.out_w;
  const T scale = T(1) / static_cast<T>(g.kernel_h * g.kernel_w);
  for_each_plane(g, [&](std::int64_t p) {
    const T* src = in + p * in_plane;
    for (std::int64_t oy = 0; oy < g.out_h; ++oy) {
      for (std::int64_t ox = 0; ox < g.out_w; ++ox) {
        std::int64_t y0, y1, x0, x1;
        g.window(oy, ox, y0, y1, x0, x1);
        T total = 0;
        for (std::int64_t y = y0; y < y1; ++y) {
          for (std::int64_t xx = x0; xx < x1; ++xx) total += src[y * g.width + xx];
        }
        values[p * out_plane + oy * g.out_w + ox] = total * scale;
      }
    }
  });
}

template <class T>
Tensor avg_backward(const PoolGeometry& g, const Shape& input_shape, const Tensor& grad_output) {
  const Tensor go = grad_output.contiguous();
  Tensor grad = zeros(input_shape, go.dtype());
  const T* src = go.data<T>();
  T* dst = grad.data<T>();
  const std::int64_t in_plane = g.height * g.width, out_plane = g.out_h * g.out_w;
  const T scale = T(1) / static_cast<T>(g.kernel_h * g.kernel_w);
  for_each_plane(g, [&](std::int64_t p) {
    T* plane = dst + p * in_plane;
    for (std::int64_t oy = 0; oy < g.out_h; ++oy) {
      for (std::int64_t ox = 0; ox < g.out_w; ++ox) {
        std::int64_t y0, y1, x0, x1;
        g.window(oy, ox, y0, y1, x0, x1);
        const T share = src[p * out_plane + oy * g.out_w + ox] * scale;
        for (std::int64_t y = y0; y < y1; ++y) {
          for (std::int64_t xx = x0; xx < x1; ++xx) plane[y * g.width + xx] += share;
        }
      }
    }
  });
  return grad;
}

kernels::PoolShape device_shape(const PoolGeometry& g) {
  return {g.height,   g.width, g.kernel_h, g.kernel_w, g.stride_h,
          g.stride_w, g.pad_h, g.pad_w,    g.out_h,    g.out_w};
}

// Pooling on a device: one thread per output, and per input pixel in the backward.
std::pair<Tensor, Tensor> max_pool2d_device(const PoolGeometry& g, const Tensor& input) {
  RINGLET_CHECK(core::is_floating(input.dtype()) && input.dtype() != DType::f16 &&
                    input.dtype() != DType::bf16,
                DTypeError, kMaxOp, ": dtype ", input.dtype(),
                " is not supported (f32 and f64 are)");
  const Tensor x = input.detach().contiguous();
  Tensor out = Tensor::empty(g.out_shape, x.dtype(), x.device());
  Tensor indices = Tensor::empty(g.out_shape, DType::i64, x.device());
  kernels_for(x.device())
      .max_pool2d(x.dtype(), device_shape(g), g.planes, x.raw_data(), out.raw_data(),
                  static_cast<std::int64_t*>(indices.raw_data()), stream_for(x.device()));
  out =
      record(kMaxOp, out, {input},
             [g, shape = x.shape(), indices](const Tensor& grad_output, const std::vector<bool>&) {
               const Tensor go = grad_output.contiguous();
               Tensor grad = Tensor::empty(shape, go.dtype(), go.device());
               kernels_for(go.device())
                   .max_pool2d_backward(go.dtype(), device_shape(g), g.planes, go.raw_data(),
                                        static_cast<std::int64_t*>(indices.raw_data()),
                                        grad.raw_data(), stream_for(go.device()));
               return std::vector<Tensor>{grad};
             });
  return {out, indices};
}

Tensor avg_pool2d_device(const PoolGeometry& g, const Tensor& input) {
  RINGLET_CHECK(input.dtype() == DType::f32 || input.dtype() == DType::f64, DTypeError, kAvgOp,
                ": dtype ", input.dtype(), " is not supported (f32 and f64 are)");
  const Tensor x = input.detach().contiguous();
  Tensor out = Tensor::empty(g.out_shape, x.dtype(), x.device());
  kernels_for(x.device())
      .avg_pool2d(x.dtype(), device_shape(g), g.planes, x.raw_data(), out.raw_data(),
                  stream_for(x.device()));
  return record(kAvgOp, out, {input},
                [g, shape = x.shape()](const Tensor& grad_output, const std::vector<bool>&) {
                  const Tensor go = grad_output.contiguous();
                  Tensor grad = Tensor::empty(shape, go.dtype(), go.device());
                  kernels_for(go.device())
                      .avg_pool2d_backward(go.dtype(), device_shape(g), g.planes, go.raw_data(),
                                           grad.raw_data(), stream_for(go.device()));
                  return std::vector<Tensor>{grad};
                });
}

// The CPU max pool (of relu(input) with `relu`, 2x2 windows only), recorded as `name`; with
// `indices`, each maximum's index in its plane there too.
Tensor max_pool_cpu(const PoolGeometry& g, const Tensor& input, bool relu, const char* name,
                    Tensor* indices) {
  const Tensor x = input.detach().contiguous();
  Tensor out = Tensor::empty(g.out_shape, x.dtype());
  if (is_two_by_two(g)) {
    Tensor positions = Tensor::empty(g.out_shape, DType::u8);
    cpu::dispatch_floating(x.dtype(), name,
                           [&]<class T>() { max_forward_2x2<T>(g, x, out, positions, relu); });
    if (indices != nullptr) *indices = indices_from_positions(g, positions);
    return record(
        name, out, {input},
        [g, shape = x.shape(), positions](const Tensor& grad_output, const std::vector<bool>&) {
          return cpu::dispatch_floating(grad_output.dtype(), kMaxOp, [&]<class T>() {
            return std::vector<Tensor>{max_backward_2x2<T>(g, shape, grad_output, positions)};
          });
        });
  }
  RINGLET_CHECK(!relu, ValueError, name, ": relu first is fused for 2x2 windows only");
  Tensor where = Tensor::empty(g.out_shape, DType::i64);
  cpu::dispatch_floating(x.dtype(), name, [&]<class T>() { max_forward<T>(g, x, out, where); });
  if (indices != nullptr) *indices = where;
  return record(name, out, {input},
                [g, shape = x.shape(), where](const Tensor& grad_output, const std::vector<bool>&) {
                  return cpu::dispatch_floating(grad_output.dtype(), kMaxOp, [&]<class T>() {
                    return std::vector<Tensor>{max_backward<T>(g, shape, grad_output, where)};
                  });
                });
}

}  // namespace

std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input,
                                                  const Pool2dOptions& options) {
  const PoolGeometry g = validate(input, options, kMaxOp);
  if (!input.device().is_cpu()) return max_pool2d_device(g, input);
  Tensor indices;
  Tensor out = max_pool_cpu(g, input, false, kMaxOp, &indices);
  return {out, indices};
}

Tensor max_pool2d(const Tensor& input, const Pool2dOptions& options) {
  const PoolGeometry g = validate(input, options, kMaxOp);
  if (!input.device().is_cpu()) return max_pool2d_device(g, input).first;
  return max_pool_cpu(g, input, false, kMaxOp, nullptr);
}

Tensor relu_max_pool2d(const Tensor& input, const Pool2dOptions& options) {
  const PoolGeometry g = validate(input, options, kMaxOp);
  const bool fused = input.device().is_cpu() &&
                     (input.dtype() == DType::f32 || input.dtype() == DType::f64) &&
                     is_two_by_two(g);
  if (!fused) return max_pool2d(relu(input), options);
  return max_pool_cpu(g, input, true, "relu_max_pool2d", nullptr);
}

Tensor avg_pool2d(const Tensor& input, const Pool2dOptions& options) {
  const PoolGeometry g = validate(input, options, kAvgOp);
  if (!input.device().is_cpu()) return avg_pool2d_device(g, input);
  const Tensor x = input.detach().contiguous();
  Tensor out = Tensor::empty(g.out_shape, x.dtype());
  cpu::dispatch_floating(x.dtype(), kAvgOp, [&]<class T>() { avg_forward<T>(g, x, out); });
  return record(kAvgOp, out, {input},
                [g, shape = x.shape()](const Tensor& grad_output, const std::vector<bool>&) {
                  return cpu::dispatch_floating(grad_output.dtype(), kAvgOp, [&]<class T>() {
                    return std::vector<Tensor>{avg_backward<T>(g, shape, grad_output)};
                  });
                });
}

}  // namespace ringlet::tensor
