// gather along a dimension on a device, and its adjoint (scatter-add) for the backward.
// Written once for CUDA and the emulated GPU (tensor/kernels/nn.h).
#pragma once

#include <cstdint>

#include "tensor/kernels/hd.h"
#include "tensor/kernels/strided.h"

namespace ringlet::tensor::kernels {

// out[c] = in[c with c_d replaced by index[c]] over the index's shape (contiguous index and
// out; `in` strided); an index out of [0, size) marks bad[c] and reads element 0 instead.
template <class T>
struct GatherFn {
  int ndim, dim;
  std::int64_t sizes[kMaxDims];       // the index's shape
  std::int64_t in_strides[kMaxDims];  // the input's strides
  std::int64_t size;                  // the input's extent along dim
  const T* in;
  const std::int64_t* index;
  T* out;
  std::uint8_t* bad;
  RINGLET_HD void operator()(std::int64_t e) const {
    std::int64_t rest = e, off = 0;
    const std::int64_t at = index[e];
    const bool inside = at >= 0 && at < size;
    for (int d = ndim - 1; d >= 0; --d) {
      const std::int64_t c = rest % sizes[d];
      rest /= sizes[d];
      off += (d == dim ? (inside ? at : 0) : c) * in_strides[d];
    }
    bad[e] = !inside;
    out[e] = in[off];
  }
};

// The gather's adjoint: grad_in[c] = sum over k of g[c with c_d = k] where index[...] == c_d,
// for c inside the index's extent in the other dims (0 elsewhere). One thread per input
// element; contiguous grad_in, index and g.
template <class T>
struct GatherBackwardFn {
  int ndim, dim;
  std::int64_t in_sizes[kMaxDims], index_sizes[kMaxDims];
  const T* g;
  const std::int64_t* index;
  T* grad_in;
  RINGLET_HD void operator()(std::int64_t e) const {
    std::int64_t rest = e, base = 0, stride = 1, dim_stride = 1, l = 0;
    bool covered = true;
    for (int d = ndim - 1; d >= 0; --d) {
      const std::int64_t c = rest % in_sizes[d];
      rest /= in_sizes[d];
      if (d == dim) {
        l = c;
        dim_stride = stride;
      } else {
        covered = covered && c < index_sizes[d];
        base += c * stride;
      }
      stride *= index_sizes[d];
    }
    T acc = 0;
    if (covered) {
      for (std::int64_t k = 0; k < index_sizes[dim]; ++k) {
        const std::int64_t at = base + k * dim_stride;
        if (index[at] == l) acc += g[at];
      }
    }
    grad_in[e] = acc;
  }
};

}  // namespace ringlet::tensor::kernels
