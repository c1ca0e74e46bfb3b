// Convolution's bodies on a device: im2col (the columns one GEMM multiplies), col2im (its
// adjoint, the input's gradient) and the bias with its activation in one pass.
// Written once for CUDA and the emulated GPU (tensor/kernels/nn.h).
#pragma once

#include <cstdint>

#include "tensor/kernels/activation.h"
#include "tensor/kernels/hd.h"

namespace ringlet::tensor::kernels {

struct ConvShape {
  std::int64_t channels, height, width;
  std::int64_t kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;
  std::int64_t out_h, out_w;
  RINGLET_HD std::int64_t rows() const { return channels * kernel_h * kernel_w; }
  RINGLET_HD std::int64_t cols() const { return out_h * out_w; }  // per image
};

// col [rows, batch * L] from contiguous NCHW images; one thread per column entry.
template <class T>
struct Im2colFn {
  ConvShape g;
  std::int64_t batch;
  const T* image;
  T* col;
  RINGLET_HD void operator()(std::int64_t e) const {
    const std::int64_t L = g.cols(), ld = batch * L;
    const std::int64_t r = e / ld, q = e % ld, n = q / L, l = q % L;
    const std::int64_t oy = l / g.out_w, ox = l % g.out_w;
    const std::int64_t c = r / (g.kernel_h * g.kernel_w), ij = r % (g.kernel_h * g.kernel_w);
    const std::int64_t i = ij / g.kernel_w, j = ij % g.kernel_w;
    const std::int64_t iy = oy * g.stride_h - g.pad_h + i * g.dilation_h;
    const std::int64_t ix = ox * g.stride_w - g.pad_w + j * g.dilation_w;
    const bool inside = iy >= 0 && iy < g.height && ix >= 0 && ix < g.width;
    col[e] = inside ? image[((n * g.channels + c) * g.height + iy) * g.width + ix] : T(0);
  }
};

// The adjoint: every input pixel sums the column entries read from it, in kernel-offset
// order (the CPU col2im's order); one thread per input element.
template <class T>
struct Col2imFn {
  ConvShape g;
  std::int64_t batch;
  const T* col;
  T* image;
  RINGLET_HD void operator()(std::int64_t e) const {
    const std::int64_t x = e % g.width, y = (e / g.width) % g.height;
    const std::int64_t c = (e / (g.width * g.height)) % g.channels;
    const std::int64_t n = e / (g.width * g.height * g.channels);
    const std::int64_t L = g.cols(), ld = batch * L;
    T acc = T(0);
    for (std::int64_t i = 0; i < g.kernel_h; ++i) {
      const std::int64_t ty = y + g.pad_h - i * g.dilation_h;
      if (ty < 0 || ty % g.stride_h != 0 || ty / g.stride_h >= g.out_h) continue;
      for (std::int64_t j = 0; j < g.kernel_w; ++j) {
        const std::int64_t tx = x + g.pad_w - j * g.dilation_w;
        if (tx < 0 || tx % g.stride_w != 0 || tx / g.stride_w >= g.out_w) continue;
        const std::int64_t row = (c * g.kernel_h + i) * g.kernel_w + j;
        acc += col[row * ld + n * L + (ty / g.stride_h) * g.out_w + tx / g.stride_w];
      }
    }
    image[e] = acc;
  }
};

// x = act(x + bias[c]) over [outer, channels, inner]; one thread per element.
template <class T>
struct BiasActFn {
  std::int64_t channels, inner;
  const T* bias;  // null: no bias
  T* data;
  Activation act;
  RINGLET_HD void operator()(std::int64_t e) const {
    const T shifted = bias != nullptr ? data[e] + bias[(e / inner) % channels] : data[e];
    data[e] = activate(shifted, act);
  }
};

}  // namespace ringlet::tensor::kernels
