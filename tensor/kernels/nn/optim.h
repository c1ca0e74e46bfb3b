// The optimizers' updates on a device: SGD and Adam / AdamW per element, PyTorch's steps with
// its fused multiply-adds (nn/sgd.cpp, nn/adam.cpp), and their multi-tensor launches over up
// to kMaxMultiTensors parameters at once.
// Written once for CUDA and the emulated GPU (tensor/kernels/nn.h).
#pragma once

#include <cstdint>

#include "tensor/kernels/hd.h"

namespace ringlet::tensor::kernels {

// SGD's update of one element, PyTorch's steps with fused multiply-adds where PyTorch's CPU
// kernels fuse (nn/sgd.cpp); `first` starts the momentum buffer from the gradient.
template <class T>
struct SgdStep {
  T weight_decay, momentum, keep;  // keep = 1 - dampening
  bool decay, nesterov;
  RINGLET_HD void operator()(T& p, T g, T* buf, bool first, T neg_lr) const {
    g = decay ? hd_fma(weight_decay, p, g) : g;
    if (buf != nullptr) {
      const T b = first ? g : hd_fma(keep, g, *buf * momentum);
      *buf = b;
      g = nesterov ? hd_fma(momentum, b, g) : b;
    }
    p = hd_fma(neg_lr, g, p);
  }
};

// The tensors of one multi-tensor launch: element i belongs to the tensor whose range holds it
// (end[t] is the running total of the sizes).
inline constexpr int kMaxMultiTensors = 24;
struct TensorRanges {
  std::int64_t end[kMaxMultiTensors];
  int count;
  // The tensor of element i (binary search over the running totals).
  RINGLET_HD int of(std::int64_t i) const {
    int lo = 0, hi = count - 1;
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (i < end[mid]) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    return lo;
  }
  RINGLET_HD std::int64_t begin(int t) const { return t == 0 ? 0 : end[t - 1]; }
};

// One SGD step over up to kMaxMultiTensors tensors in one launch (PyTorch's foreach SGD). The
// learning rate is read from device memory when `lr` is set (a captured step's rate changes
// between replays), else it is neg_lr's.
template <class T>
struct MultiSgdFn {
  TensorRanges ranges;
  T* p[kMaxMultiTensors];
  const T* grad[kMaxMultiTensors];
  T* buf[kMaxMultiTensors];  // nullptr without momentum
  bool first[kMaxMultiTensors];
  SgdStep<T> step;
  T neg_lr;
  const double* lr;
  RINGLET_HD void operator()(std::int64_t i) const {
    const int t = ranges.of(i);
    const std::int64_t j = i - ranges.begin(t);
    const T rate = lr != nullptr ? static_cast<T>(-*lr) : neg_lr;
    step(p[t][j], grad[t][j], buf[t] != nullptr ? buf[t] + j : nullptr, first[t], rate);
  }
};

// Adam / AdamW for one element: PyTorch's steps, fused where its CPU kernels fuse
// (nn/adam.cpp's loop).
// One Adam/AdamW step of one element (nn/adam.cpp's arithmetic).
template <class T>
struct AdamStep {
  T wd, decay, beta1, beta2, one_minus_beta1, one_minus_beta2, eps;
  bool l2, decoupled;
  RINGLET_HD void operator()(T& p, T g, T& m, T& v, T* vmax, T bc2_sqrt, T neg_step_size) const {
    T pi = p;
    pi = decoupled ? pi * decay : pi;
    g = l2 ? hd_fma(wd, pi, g) : g;
    const T mi = hd_fma(one_minus_beta1, g, m * beta1);
    const T vi = hd_fma(one_minus_beta2 * g, g, v * beta2);
    m = mi;
    v = vi;
    T second = vi;
    if (vmax != nullptr) {
      second = *vmax < vi ? vi : *vmax;
      *vmax = second;
    }
    const T denom = hd_sqrt(second) / bc2_sqrt + eps;
    p = pi + neg_step_size * mi / denom;
  }
};

// One Adam/AdamW step over up to kMaxMultiTensors tensors in one launch, each with its own bias
// corrections (its own step count).
template <class T>
struct MultiAdamFn {
  TensorRanges ranges;
  T* p[kMaxMultiTensors];
  const T* grad[kMaxMultiTensors];
  T* m[kMaxMultiTensors];
  T* v[kMaxMultiTensors];
  T* vmax[kMaxMultiTensors];  // amsgrad only, else nullptr
  T bc2_sqrt[kMaxMultiTensors];
  T neg_step_size[kMaxMultiTensors];
  AdamStep<T> step;
  RINGLET_HD void operator()(std::int64_t i) const {
    const int t = ranges.of(i);
    const std::int64_t j = i - ranges.begin(t);
    step(p[t][j], grad[t][j], m[t][j], v[t][j], vmax[t] != nullptr ? vmax[t] + j : nullptr,
         bc2_sqrt[t], neg_step_size[t]);
  }
};

}  // namespace ringlet::tensor::kernels
