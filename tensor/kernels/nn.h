// Per-element and per-row bodies of the network ops (convolution's im2col/col2im, max and
// average pooling, softmax lanes, cross-entropy rows, argmax lanes, gather, SGD and Adam), written
// once for the device kernels (device_kernels_impl.h) on CUDA and the emulated GPU. Each body
// computes in the order the CPU kernel does (the same sums in the same order), so the emulated
// device matches the CPU bit for bit where the CPU does not reorder for speed.
#pragma once

#include <cstdint>

#include "tensor/kernels/activation.h"
#include "tensor/kernels/hd.h"
#include "tensor/kernels/strided.h"

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
// words (tensor/device/sticky_error.h) as one packed store, code | index | value (saturated to
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

// Dropout on a device from a counter-based generator: element i keeps its value (scaled) when
// the uniform drawn from hash(seed, i) is below keep, so the mask depends on (seed, i) alone:
// the same on every device and for any launch geometry. The scaled mask is stored for the
// backward.
RINGLET_HD double counter_uniform(std::uint64_t seed, std::uint64_t i) {
  std::uint64_t x = seed + (i + 1) * 0x9e3779b97f4a7c15ull;  // splitmix64 of the counter
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  return static_cast<double>(x >> 11) * 0x1.0p-53;
}

template <class T>
struct DropoutFn {
  std::uint64_t seed;
  double keep;
  T scale;
  const T* in;  // contiguous
  T* out;
  T* mask;
  RINGLET_HD void operator()(std::int64_t i) const {
    const T m = counter_uniform(seed, static_cast<std::uint64_t>(i)) < keep ? scale : T(0);
    mask[i] = m;
    out[i] = in[i] * m;
  }
};

}  // namespace ringlet::tensor::kernels
