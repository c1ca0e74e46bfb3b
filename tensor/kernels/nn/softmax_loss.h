// Per-lane and per-row bodies on a device: softmax and log-softmax with their backward, max /
// min with the first index (argmax), cross-entropy with label smoothing and its gradient, and
// the labels' range check.
// Written once for CUDA and the emulated GPU (tensor/kernels/nn.h).
#pragma once

#include <cstdint>

#include "tensor/kernels/hd.h"

namespace ringlet::tensor::kernels {

// A lane: `length` elements `inner` apart in a contiguous tensor seen as [outer, length,
// inner]; lane k starts at (k / inner) * length * inner + k % inner.
struct Lanes {
  std::int64_t outer, length, inner;
  RINGLET_HD std::int64_t start(std::int64_t k) const {
    return (k / inner) * length * inner + k % inner;
  }
  RINGLET_HD std::int64_t count() const { return outer * inner; }
};

// Softmax (kLog = false) or log-softmax of one lane, the CPU's steps in the CPU's order.
template <class T, bool kLog>
struct SoftmaxLaneFn {
  Lanes lanes;
  const T* in;
  T* out;
  RINGLET_HD void operator()(std::int64_t k) const {
    const std::int64_t s = lanes.start(k), step = lanes.inner, n = lanes.length;
    T top = -hd_infinity<T>();
    for (std::int64_t i = 0; i < n; ++i) top = hd_max(top, in[s + i * step]);
    double total = 0.0;
    for (std::int64_t i = 0; i < n; ++i) {
      const T shifted = in[s + i * step] - top;
      const T e = hd_exp(shifted);
      total += e;
      out[s + i * step] = kLog ? shifted : e;
    }
    const T log_total = static_cast<T>(hd_log(total));
    const T inv_total = static_cast<T>(1.0 / total);
    for (std::int64_t i = 0; i < n; ++i) {
      T& y = out[s + i * step];
      y = kLog ? y - log_total : y * inv_total;
    }
  }
};

// dx = y * (g - <g, y>) (softmax) or g - exp(y) * sum(g) (log-softmax), per lane.
template <class T, bool kLog>
struct SoftmaxBackwardLaneFn {
  Lanes lanes;
  const T* g;
  const T* y;
  T* out;
  RINGLET_HD void operator()(std::int64_t k) const {
    const std::int64_t s = lanes.start(k), step = lanes.inner, n = lanes.length;
    double total = 0.0;
    for (std::int64_t i = 0; i < n; ++i)
      total += kLog ? g[s + i * step] : g[s + i * step] * y[s + i * step];
    const auto sum = static_cast<T>(total);
    for (std::int64_t i = 0; i < n; ++i) {
      const T gi = g[s + i * step], yi = y[s + i * step];
      out[s + i * step] = kLog ? gi - hd_exp(yi) * sum : yi * (gi - sum);
    }
  }
};

// The max (kMax) or min of a lane and its first index; NaN wins (as the CPU's).
template <class T, bool kMax>
struct ExtremeLaneFn {
  Lanes lanes;
  const T* in;
  T* values;
  std::int64_t* indices;
  RINGLET_HD void operator()(std::int64_t k) const {
    const std::int64_t s = lanes.start(k), step = lanes.inner;
    T best = in[s];
    std::int64_t at = 0;
    for (std::int64_t i = 1; i < lanes.length; ++i) {
      const T v = in[s + i * step];
      if (best != best) break;  // NaN already won
      if ((kMax ? v > best : v < best) || v != v) {
        best = v;
        at = i;
      }
    }
    if (values != nullptr) values[k] = best;
    indices[k] = at;
  }
};

// Cross-entropy of row i with label smoothing eps, against contiguous logits [n, classes]:
// loss_i = (1 - eps) (lse_i - x[i, t_i]) + eps / C * (C lse_i - sum_j x_ij); lse_i saved.
template <class T>
struct CrossEntropyRowFn {
  std::int64_t classes;
  double eps;
  const T* logits;
  const std::int64_t* labels;
  T* loss;
  double* lse;
  RINGLET_HD void operator()(std::int64_t i) const {
    const T* row = logits + i * classes;
    double top = -hd_infinity<double>();
    for (std::int64_t j = 0; j < classes; ++j) top = hd_max(top, double(row[j]));
    double total = 0.0, row_sum = 0.0;
    for (std::int64_t j = 0; j < classes; ++j) {
      total += hd_exp(double(row[j]) - top);
      row_sum += double(row[j]);
    }
    lse[i] = top + hd_log(total);
    const double nll = lse[i] - double(row[labels[i]]);
    const double smooth = double(classes) * lse[i] - row_sum;
    // Without smoothing its term is left out, not multiplied by 0: a -inf logit makes it inf.
    const double value = (1.0 - eps) * nll + (eps != 0.0 ? eps / double(classes) * smooth : 0.0);
    loss[i] = static_cast<T>(value);
  }
};

// d loss / d x_ij = scale_i (softmax_ij - (1 - eps) [j == t_i] - eps / C), where scale_i is
// g[i] (no reduction) or g[0] (sum) or g[0] / n (mean).
template <class T>
struct CrossEntropyGradFn {
  std::int64_t rows, classes;
  double eps;
  int reduction;  // 0 none, 1 sum, 2 mean
  const T* logits;
  const std::int64_t* labels;
  const double* lse;
  const T* g;
  T* grad;
  RINGLET_HD void operator()(std::int64_t e) const {
    const std::int64_t i = e / classes, j = e % classes;
    const double scale = reduction == 0   ? double(g[i])
                         : reduction == 1 ? double(g[0])
                                          : double(g[0]) / static_cast<double>(rows);
    double d = hd_exp(double(logits[e]) - lse[i]) - eps / double(classes);
    if (j == labels[i]) d -= 1.0 - eps;
    grad[e] = static_cast<T>(scale * d);
  }
};

// Whether every label lies in [0, classes): a bad one is recorded in the device's sticky error
// words (device/sticky_error.h) as one packed store, code | index | value (saturated to
// 32 bits), after the limit; of several bad labels any one may be the one recorded.
struct LabelCheckFn {
  std::int64_t classes;
  const std::int64_t* labels;
  std::uint64_t* error;
  std::uint64_t code;
  RINGLET_HD void operator()(std::int64_t i) const {
    const std::int64_t v = labels[i];
    if (v >= 0 && v < classes) return;
    const std::int64_t low = -2147483647 - 1, high = 2147483647;
    const std::int64_t saturated = v > high ? high : v < low ? low : v;
    const std::uint64_t index = i > 0xffffff ? 0xffffff : static_cast<std::uint64_t>(i);
    store_word(error + 1, static_cast<std::uint64_t>(classes));
    store_word(error, code << 56 | index << 32 |
                          static_cast<std::uint32_t>(static_cast<std::int32_t>(saturated)));
  }
};

}  // namespace ringlet::tensor::kernels
