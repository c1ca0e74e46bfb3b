// Batch norm's bodies on a device, and the per-channel sums a convolution's bias gradient
// shares with it: run sums, then channel totals in image order, as the CPU adds them.
// Written once for CUDA and the emulated GPU (tensor/kernels/nn.h).
#pragma once

#include <cstdint>

#include "tensor/kernels/activation.h"
#include "tensor/kernels/hd.h"

namespace ringlet::tensor::kernels {

// --- batch norm, per channel and per element, in the CPU kernel's arithmetic (tensor/ops/
// norm.cpp): per-channel sums in f64 with eight lanes per run, two passes for the variance,
// y = x * a + k with a, k folded per channel.

struct BnShape {
  std::int64_t batch, channels, spatial;
};

// Sums fn(i) for i in [0, n) with eight f64 lanes, then the tail, then the lanes (norm.cpp's
// lane_sum).
template <class F>
RINGLET_HD double lane_sum(std::int64_t n, const F& fn) {
  double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) lanes[k] += fn(i + k);
  }
  double total = 0;
  for (; i < n; ++i) total += fn(i);
  for (int k = 0; k < 8; ++k) total += lanes[k];
  return total;
}

// The per-channel sums take two launches so that a GPU has a thread for every run (image n,
// channel c; e = n * channels + c) rather than one per channel: BnRunSumFn sums each run's
// spatial elements into partial[e] (lane_sum), then one thread per channel adds its runs'
// partials in image order. That is the CPU kernel's order of operations exactly (norm.cpp sums
// a lane_sum per run, image after image), so the results match it bit for bit.
enum class BnRun { x, centered_square, dy, dy_centered };

template <class T, BnRun What>
struct BnRunSumFn {
  BnShape l;
  const T *x, *dy;     // dy only for BnRun::dy / dy_centered
  const double* mean;  // only for the centered sums
  double* partial;     // [batch * channels]
  RINGLET_HD void operator()(std::int64_t e) const {
    const std::int64_t at = e * l.spatial;
    double m = 0;
    if constexpr (What == BnRun::centered_square || What == BnRun::dy_centered) {
      m = mean[e % l.channels];
    }
    partial[e] = lane_sum(l.spatial, [&](std::int64_t i) -> double {
      if constexpr (What == BnRun::x) {
        return static_cast<double>(x[at + i]);
      } else if constexpr (What == BnRun::centered_square) {
        const double d = x[at + i] - m;
        return d * d;
      } else if constexpr (What == BnRun::dy) {
        return static_cast<double>(dy[at + i]);
      } else {
        return static_cast<double>(dy[at + i]) * (x[at + i] - m);
      }
    });
  }
};

// Channel c's total over the images of per-run partials ([batch * channels], run n * channels
// + c), in image order: the second launch of the batch-norm sums and the conv bias gradient.
RINGLET_HD double channel_total(std::int64_t batch, std::int64_t channels, const double* partial,
                                std::int64_t c) {
  double total = 0;
  for (std::int64_t n = 0; n < batch; ++n) total += partial[n * channels + c];
  return total;
}

// Mean of channel c over batch and spatial dims, from the runs' sums.
struct BnMeanFn {
  BnShape l;
  const double* partial;
  double* mean;
  RINGLET_HD void operator()(std::int64_t c) const {
    const double count = static_cast<double>(l.batch * l.spatial);
    mean[c] = count > 0 ? channel_total(l.batch, l.channels, partial, c) / count : 0.0;
  }
};

// Biased variance and 1/sqrt(var + eps) of channel c, from the runs' centered square sums.
struct BnVarFn {
  BnShape l;
  double eps;
  const double* partial;
  double *var, *invstd;
  RINGLET_HD void operator()(std::int64_t c) const {
    const double count = static_cast<double>(l.batch * l.spatial);
    var[c] = count > 0 ? channel_total(l.batch, l.channels, partial, c) / count : 0.0;
    invstd[c] = 1.0 / hd_sqrt(var[c] + eps);
  }
};

// Evaluation: the running statistics as mean and invstd.
template <class T>
struct BnEvalStatsFn {
  double eps;
  const T *running_mean, *running_var;
  std::int64_t stride_mean, stride_var;
  double *mean, *invstd;
  RINGLET_HD void operator()(std::int64_t c) const {
    mean[c] = running_mean[c * stride_mean];
    invstd[c] = 1.0 / hd_sqrt(static_cast<double>(running_var[c * stride_var]) + eps);
  }
};

template <class T>
struct BnRunningFn {
  double momentum, bessel;  // bessel = count / (count - 1)
  const double *mean, *var;
  T *running_mean, *running_var;
  std::int64_t stride_mean, stride_var;
  RINGLET_HD void operator()(std::int64_t c) const {
    T& rm = running_mean[c * stride_mean];
    T& rv = running_var[c * stride_var];
    rm = static_cast<T>((1 - momentum) * rm + momentum * mean[c]);
    rv = static_cast<T>((1 - momentum) * rv + momentum * var[c] * bessel);
  }
};

// y = x * a + k per element, a = invstd * w and k = b - mean * a of its channel.
template <class T>
struct BnNormalizeFn {
  BnShape l;
  const T* x;
  const double *mean, *invstd;
  const T* w;  // nullptr: 1
  const T* b;  // nullptr: 0
  std::int64_t stride_w, stride_b;
  T* y;
  Activation act;  // applied to the normalized value (batch norm + ReLU as one kernel)
  RINGLET_HD void operator()(std::int64_t e) const {
    const std::int64_t c = (e / l.spatial) % l.channels;
    const double scale = invstd[c] * (w ? static_cast<double>(w[c * stride_w]) : 1.0);
    const double shift = (b ? static_cast<double>(b[c * stride_b]) : 0.0) - mean[c] * scale;
    y[e] = activate(x[e] * static_cast<T>(scale) + static_cast<T>(shift), act);
  }
};

// Per channel: sum(dy) and sum(dy * (x - mean)) * invstd, from the runs' sums (BnRunSumFn
// with BnRun::dy and BnRun::dy_centered).
struct BnBackwardTotalsFn {
  BnShape l;
  const double *partial_dy, *partial_dy_centered, *invstd;
  double *sum_dy, *sum_dy_xhat;
  RINGLET_HD void operator()(std::int64_t c) const {
    sum_dy[c] = channel_total(l.batch, l.channels, partial_dy, c);
    sum_dy_xhat[c] = channel_total(l.batch, l.channels, partial_dy_centered, c) * invstd[c];
  }
};

// dx = a * dy + b * (x - mean) + k, with a, b, k folded per channel (training: through the
// batch statistics; evaluation: dx = a * dy, x unread, so a NaN input passes no NaN back).
template <class T>
struct BnBackwardInputFn {
  BnShape l;
  const T *x, *dy;
  const double *mean, *invstd;
  const T* w;
  std::int64_t stride_w;
  const double *sum_dy, *sum_dy_xhat;  // unused in evaluation
  double count;
  bool training;
  T* dx;
  RINGLET_HD void operator()(std::int64_t e) const {
    const std::int64_t c = (e / l.spatial) % l.channels;
    const double scale = invstd[c] * (w ? static_cast<double>(w[c * stride_w]) : 1.0);
    const double dy_shift = training ? sum_dy[c] / count : 0.0;
    const double xhat_coef = training ? sum_dy_xhat[c] / count : 0.0;
    const T a = static_cast<T>(scale);
    const T b = static_cast<T>(-scale * invstd[c] * xhat_coef);
    const T k = static_cast<T>(-scale * dy_shift);
    const T m = static_cast<T>(mean[c]);
    dx[e] = training ? a * dy[e] + b * (x[e] - m) + k : a * dy[e];
  }
};

// The bias gradient of a convolution, in two launches as the batch-norm sums: per run (image
// n, output channel o; e = n * channels + o) the CPU's sum_run (eight lanes in T, the tail and
// the lanes added in f64) into partial[e], then per channel the runs in image order, in f64
// (ChannelTotalFn).
template <class T>
struct ConvBiasRunFn {
  std::int64_t plane;  // oH * oW
  const T* dy;         // contiguous [batch, channels, plane]
  double* partial;     // [batch * channels]
  RINGLET_HD void operator()(std::int64_t e) const {
    const T* p = dy + e * plane;
    T lanes[8] = {T(0), T(0), T(0), T(0), T(0), T(0), T(0), T(0)};
    std::int64_t i = 0;
    for (; i + 8 <= plane; i += 8) {
      for (int k = 0; k < 8; ++k) lanes[k] += p[i + k];
    }
    double run = 0;
    for (; i < plane; ++i) run += p[i];
    for (int k = 0; k < 8; ++k) run += lanes[k];
    partial[e] = run;
  }
};

// Per channel: the total of its runs' partials, in image order, as T (the conv bias gradient;
// with T = double the synchronized batch norm's sums before they are reduced across ranks).
template <class T>
struct ChannelTotalFn {
  std::int64_t batch, channels;
  const double* partial;
  T* total;
  RINGLET_HD void operator()(std::int64_t c) const {
    total[c] = static_cast<T>(channel_total(batch, channels, partial, c));
  }
};

}  // namespace ringlet::tensor::kernels
