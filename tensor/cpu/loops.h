// Strided N-d iteration for CPU kernels. for_each_offset walks `shape` in row-major order and
// calls fn(offsets) with the element offset of each of K operands (given their strides, in
// elements; a broadcast operand has stride 0). The innermost dimension is a plain loop so the
// compiler can vectorize contiguous cases; callers handle the all-contiguous case with a flat
// loop themselves where it matters.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace ringlet::tensor::cpu {

template <std::size_t K, class F>
void for_each_offset(const std::vector<std::int64_t>& shape,
                     const std::array<const std::vector<std::int64_t>*, K>& strides, F&& fn) {
  const std::size_t ndim = shape.size();
  for (auto extent : shape) {
    if (extent == 0) return;
  }
  std::array<std::int64_t, K> base{};
  if (ndim == 0) {
    fn(base);
    return;
  }
  const std::int64_t inner = shape[ndim - 1];
  std::array<std::int64_t, K> inner_stride{};
  for (std::size_t k = 0; k < K; ++k) inner_stride[k] = (*strides[k])[ndim - 1];
  std::vector<std::int64_t> counter(ndim, 0);
  while (true) {
    std::array<std::int64_t, K> off = base;
    for (std::int64_t i = 0; i < inner; ++i) {
      fn(off);
      for (std::size_t k = 0; k < K; ++k) off[k] += inner_stride[k];
    }
    // advance the outer dimensions like an odometer
    std::size_t d = ndim - 1;
    while (true) {
      if (d == 0) return;
      --d;
      ++counter[d];
      for (std::size_t k = 0; k < K; ++k) base[k] += (*strides[k])[d];
      if (counter[d] < shape[d]) break;
      for (std::size_t k = 0; k < K; ++k) base[k] -= (*strides[k])[d] * shape[d];
      counter[d] = 0;
    }
  }
}

}  // namespace ringlet::tensor::cpu
