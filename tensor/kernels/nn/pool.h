// Pooling's bodies on a device: max pooling (the first maximum's index kept for the backward)
// and average pooling, each with its backward, windows clipped to the input as the CPU's.
// Written once for CUDA and the emulated GPU (tensor/kernels/nn.h).
#pragma once

#include <cstdint>

#include "tensor/kernels/hd.h"

namespace ringlet::tensor::kernels {

struct PoolShape {
  std::int64_t height, width, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
  std::int64_t out_h, out_w;
};

// Output e's window, clipped to the input: plane, rows [y0, y1), columns [x0, x1).
struct PoolWindow {
  std::int64_t plane, y0, y1, x0, x1;
};
RINGLET_HD PoolWindow pool_window(const PoolShape& g, std::int64_t e) {
  const std::int64_t o = e % (g.out_h * g.out_w), oy = o / g.out_w, ox = o % g.out_w;
  const std::int64_t ys = oy * g.stride_h - g.pad_h, xs = ox * g.stride_w - g.pad_w;
  return {e / (g.out_h * g.out_w), ys > 0 ? ys : 0,
          ys + g.kernel_h < g.height ? ys + g.kernel_h : g.height, xs > 0 ? xs : 0,
          xs + g.kernel_w < g.width ? xs + g.kernel_w : g.width};
}

// Max over each window (clipped to the input); the first maximum wins, the last NaN wins (the
// CPU's rule). One thread
// per output element; `where` is the index within the input plane.
template <class T>
struct MaxPoolFn {
  PoolShape g;
  const T* in;
  T* out;
  std::int64_t* where;
  RINGLET_HD void operator()(std::int64_t e) const {
    const PoolWindow w = pool_window(g, e);
    const T* src = in + w.plane * g.height * g.width;
    T best = src[w.y0 * g.width + w.x0];
    std::int64_t at = w.y0 * g.width + w.x0;
    for (std::int64_t y = w.y0; y < w.y1; ++y) {
      for (std::int64_t x = w.x0; x < w.x1; ++x) {
        const T v = src[y * g.width + x];
        if (v > best || v != v) {  // the CPU's rule: a later NaN wins too
          best = v;
          at = y * g.width + x;
        }
      }
    }
    out[e] = best;
    where[e] = at;
  }
};

// The first pooling window [o * stride, o * stride + kernel) that holds padded position q.
RINGLET_HD std::int64_t first_window(std::int64_t q, std::int64_t kernel, std::int64_t stride) {
  const std::int64_t lo = q - kernel + 1;
  return lo <= 0 ? 0 : (lo + stride - 1) / stride;
}
// The last one, clipped to the outputs.
RINGLET_HD std::int64_t last_window(std::int64_t q, std::int64_t stride, std::int64_t out) {
  const std::int64_t hi = q / stride;
  return hi < out - 1 ? hi : out - 1;
}

// The outputs whose windows hold input element e (oy * stride - pad <= y < that + kernel):
// rows [oy0, oy1], columns [ox0, ox1] of the output plane starting at `base`; `pixel` is e's
// position within its plane.
struct PoolCover {
  std::int64_t base, pixel, oy0, oy1, ox0, ox1;
};
RINGLET_HD PoolCover pool_cover(const PoolShape& g, std::int64_t e) {
  const std::int64_t plane = e / (g.height * g.width), p = e % (g.height * g.width);
  const std::int64_t y = p / g.width, x = p % g.width;
  return {plane * g.out_h * g.out_w,
          p,
          first_window(y + g.pad_h, g.kernel_h, g.stride_h),
          last_window(y + g.pad_h, g.stride_h, g.out_h),
          first_window(x + g.pad_w, g.kernel_w, g.stride_w),
          last_window(x + g.pad_w, g.stride_w, g.out_w)};
}

// Each input pixel gathers the gradients of the outputs that chose it, in output order.
template <class T>
struct MaxPoolBackwardFn {
  PoolShape g;
  const T* grad_out;
  const std::int64_t* where;
  T* grad_in;
  RINGLET_HD void operator()(std::int64_t e) const {
    const PoolCover c = pool_cover(g, e);
    T acc = T(0);
    for (std::int64_t oy = c.oy0; oy <= c.oy1; ++oy) {
      for (std::int64_t ox = c.ox0; ox <= c.ox1; ++ox) {
        const std::int64_t o = c.base + oy * g.out_w + ox;
        if (where[o] == c.pixel) acc += grad_out[o];
      }
    }
    grad_in[e] = acc;
  }
};

// Average over each window (count_include_pad: the divisor is always kH*kW), the CPU's sum
// order; one thread per output.
template <class T>
struct AvgPoolFn {
  PoolShape g;
  const T* in;
  T* out;
  RINGLET_HD void operator()(std::int64_t e) const {
    const PoolWindow w = pool_window(g, e);
    const T* src = in + w.plane * g.height * g.width;
    T total = 0;
    for (std::int64_t y = w.y0; y < w.y1; ++y)
      for (std::int64_t x = w.x0; x < w.x1; ++x) total += src[y * g.width + x];
    out[e] = total * (T(1) / static_cast<T>(g.kernel_h * g.kernel_w));
  }
};

// Each input pixel gathers the shares of the windows holding it, in output order.
template <class T>
struct AvgPoolBackwardFn {
  PoolShape g;
  const T* grad_out;
  T* grad_in;
  RINGLET_HD void operator()(std::int64_t e) const {
    const PoolCover c = pool_cover(g, e);
    const T scale = T(1) / static_cast<T>(g.kernel_h * g.kernel_w);
    T acc = 0;
    for (std::int64_t oy = c.oy0; oy <= c.oy1; ++oy)
      for (std::int64_t ox = c.ox0; ox <= c.ox1; ++ox)
        acc += grad_out[c.base + oy * g.out_w + ox] * scale;
    grad_in[e] = acc;
  }
};

}  // namespace ringlet::tensor::kernels
