// How a device kernel finds its operands: View is a plain description of one operand (data
// pointer, dtype, the iteration shape and its strides in elements; 0 where it broadcasts),
// copied by value into the kernel. Indexer<K> turns the linear index of an element of the
// iteration shape into the element offset of each of K operands, with a fast path when all of
// them are contiguous in the same shape.
#pragma once

#include <cstdint>

#include "tensor/kernels/hd.h"

namespace ringlet::tensor::kernels {

inline constexpr int kMaxDims = 8;

struct View {
  void* data = nullptr;
  DType dtype = DType::f32;
  int ndim = 0;
  std::int64_t sizes[kMaxDims] = {};
  std::int64_t strides[kMaxDims] = {};

  std::int64_t numel() const {
    std::int64_t n = 1;
    for (int d = 0; d < ndim; ++d) n *= sizes[d];
    return n;
  }
  bool contiguous() const {
    std::int64_t expected = 1;
    for (int d = ndim - 1; d >= 0; --d) {
      if (sizes[d] != 1 && strides[d] != expected) return false;
      expected *= sizes[d];
    }
    return true;
  }
  template <class T>
  T* as() const {
    return static_cast<T*>(data);
  }
};

template <int K>
struct Indexer {
  int ndim = 0;
  bool flat = true;  // every operand contiguous: offset == linear index
  std::int64_t sizes[kMaxDims] = {};
  std::int64_t strides[K][kMaxDims] = {};

  // All views must have the same sizes (the op layer broadcast them). Size-1 dims are
  // dropped and neighbours that every operand walks as one (stride[d] = stride[d+1] *
  // size[d+1]) merged, so a broadcast over [N, C, H, W] costs three divisions, not four.
  static Indexer make(const View* const (&views)[K]) {
    Indexer ix;
    for (int k = 0; k < K; ++k) ix.flat = ix.flat && views[k]->contiguous();
    for (int d = 0; d < views[0]->ndim; ++d) {
      const std::int64_t size = views[0]->sizes[d];
      if (size == 1) continue;
      bool merge = ix.ndim > 0;
      for (int k = 0; k < K && merge; ++k) {
        merge = ix.strides[k][ix.ndim - 1] == views[k]->strides[d] * size;
      }
      if (merge) {
        ix.sizes[ix.ndim - 1] *= size;
        for (int k = 0; k < K; ++k) ix.strides[k][ix.ndim - 1] = views[k]->strides[d];
        continue;
      }
      ix.sizes[ix.ndim] = size;
      for (int k = 0; k < K; ++k) ix.strides[k][ix.ndim] = views[k]->strides[d];
      ++ix.ndim;
    }
    return ix;
  }

  RINGLET_HD void offsets(std::int64_t linear, std::int64_t (&out)[K]) const {
    if (flat) {
      for (int k = 0; k < K; ++k) out[k] = linear;
      return;
    }
    for (int k = 0; k < K; ++k) out[k] = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const std::int64_t i = linear % sizes[d];
      linear /= sizes[d];
      for (int k = 0; k < K; ++k) out[k] += i * strides[k][d];
    }
  }
};

}  // namespace ringlet::tensor::kernels
