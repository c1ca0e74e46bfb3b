// im2col / col2im for 2-D convolution on contiguous NCHW images. The column matrix has one
// row per (channel, kernel row, kernel column) and one column per output pixel; a batch
// lays its images side by side, so image n owns columns [n * L, (n + 1) * L) of a matrix with
// row stride `ld` (L = out_h * out_w). Padding reads as zero. col2im is the adjoint: it sums
// every column entry back into the input pixel it was read from.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace ringlet::tensor::cpu {

struct ConvGeometry {
  std::int64_t channels, height, width;
  std::int64_t kernel_h, kernel_w;
  std::int64_t stride_h, stride_w;
  std::int64_t pad_h, pad_w;
  std::int64_t dilation_h, dilation_w;
  std::int64_t out_h, out_w;

  std::int64_t col_rows() const { return channels * kernel_h * kernel_w; }
  std::int64_t col_cols() const { return out_h * out_w; }  // per image
};

namespace detail {

// The output columns [lo, hi) whose input column ox * stride + offset lies inside [0, size).
inline void valid_range(std::int64_t offset, std::int64_t stride, std::int64_t size,
                        std::int64_t out_size, std::int64_t& lo, std::int64_t& hi) {
  lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  hi = size - 1 - offset < 0 ? 0 : (size - 1 - offset) / stride + 1;
  lo = std::min(lo, out_size);
  hi = std::clamp(hi, lo, out_size);
}

}  // namespace detail

// Writes the rows of channels [c_begin, c_end) of one image into `col`.
template <class T>
void im2col(const ConvGeometry& g, const T* image, std::int64_t c_begin, std::int64_t c_end, T* col,
            std::int64_t ld) {
  for (std::int64_t c = c_begin; c < c_end; ++c) {
    const T* plane = image + c * g.height * g.width;
    for (std::int64_t i = 0; i < g.kernel_h; ++i) {
      for (std::int64_t j = 0; j < g.kernel_w; ++j) {
        T* row = col + ((c * g.kernel_h + i) * g.kernel_w + j) * ld;
        const std::int64_t x_offset = j * g.dilation_w - g.pad_w;
        std::int64_t lo, hi;
        detail::valid_range(x_offset, g.stride_w, g.width, g.out_w, lo, hi);
        for (std::int64_t oy = 0; oy < g.out_h; ++oy) {
          T* dst = row + oy * g.out_w;
          const std::int64_t iy = oy * g.stride_h - g.pad_h + i * g.dilation_h;
          if (iy < 0 || iy >= g.height) {
            std::fill(dst, dst + g.out_w, T(0));
            continue;
          }
          const T* src = plane + iy * g.width;
          std::fill(dst, dst + lo, T(0));
          if (g.stride_w == 1) {
            std::memcpy(dst + lo, src + x_offset + lo,
                        static_cast<std::size_t>(hi - lo) * sizeof(T));
          } else {
            for (std::int64_t ox = lo; ox < hi; ++ox) dst[ox] = src[x_offset + ox * g.stride_w];
          }
          std::fill(dst + hi, dst + g.out_w, T(0));
        }
      }
    }
  }
}

// Overwrites channels [c_begin, c_end) of one image's gradient with the sums of their
// column entries.
template <class T>
void col2im(const ConvGeometry& g, const T* col, std::int64_t ld, std::int64_t c_begin,
            std::int64_t c_end, T* image) {
  for (std::int64_t c = c_begin; c < c_end; ++c) {
    T* plane = image + c * g.height * g.width;
    std::fill(plane, plane + g.height * g.width, T(0));
    for (std::int64_t i = 0; i < g.kernel_h; ++i) {
      for (std::int64_t j = 0; j < g.kernel_w; ++j) {
        const T* row = col + ((c * g.kernel_h + i) * g.kernel_w + j) * ld;
        const std::int64_t x_offset = j * g.dilation_w - g.pad_w;
        std::int64_t lo, hi;
        detail::valid_range(x_offset, g.stride_w, g.width, g.out_w, lo, hi);
        for (std::int64_t oy = 0; oy < g.out_h; ++oy) {
          const std::int64_t iy = oy * g.stride_h - g.pad_h + i * g.dilation_h;
          if (iy < 0 || iy >= g.height) continue;
          const T* src = row + oy * g.out_w;
          T* dst = plane + iy * g.width;
          for (std::int64_t ox = lo; ox < hi; ++ox) dst[x_offset + ox * g.stride_w] += src[ox];
        }
      }
    }
  }
}

}  // namespace ringlet::tensor::cpu
