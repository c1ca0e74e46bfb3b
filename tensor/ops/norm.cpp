// batch_norm on the CPU over [N, C, *]: statistics per channel over the batch and trailing
// dims, channels in parallel. Training normalizes with the batch mean and biased variance and
// updates the running statistics in place as PyTorch does (running = (1 - momentum) * running
// + momentum * stat, with the unbiased variance). Statistics accumulate in f64, in two passes.
// The training backward goes through the batch statistics:
//   dx = w * invstd * (dy - mean(dy) - xhat * mean(dy * xhat)).
// On a device (cuda, emu) the same arithmetic runs as device kernels (batch_norm_device); a
// synchronized normalization's sums go through the host to the reducer and back.
#include "tensor/ops/norm.h"

#include <cmath>
#include <type_traits>
#include <vector>

#include "core/threads.h"
#include "tensor/autograd.h"
#include "tensor/cpu/dispatch.h"
#include "tensor/cpu/flat_loops.h"
#include "tensor/ops/creation.h"
#include "tensor/ops/device_dispatch.h"
#include "tensor/ops/elementwise.h"

namespace ringlet::tensor {
namespace {

constexpr const char* kOp = "batch_norm";
// Runs of at least this many values go through the level's multiply-add loops.
constexpr std::int64_t kAffineCallMin = 64;

// A contiguous [N, C, S] view of the problem (S = product of the trailing dims).
struct Layout {
  std::int64_t batch, channels, spatial;
  std::int64_t count() const { return batch * spatial; }  // values per channel

  // Calls fn(pointer to a run of `spatial` values) for every run of channel c.
  template <class T, class F>
  void for_runs(T* base, std::int64_t c, F&& fn) const {
    for (std::int64_t n = 0; n < batch; ++n) fn(base + (n * channels + c) * spatial);
  }
};

void check_parameter(const Tensor& t, const char* what, const Tensor& input) {
  if (!t.defined()) return;
  RINGLET_CHECK(t.device() == input.device(), DeviceError, kOp, ": ", what, " is on ", t.device(),
                " but the input on ", input.device());
  RINGLET_CHECK(t.dim() == 1 && t.size(0) == input.size(1), ShapeError, kOp, ": ", what,
                " must have shape [", input.size(1), "] (the channels of input ",
                shape_str(input.shape()), "), got ", shape_str(t.shape()));
  RINGLET_CHECK(t.dtype() == input.dtype(), DTypeError, kOp, ": ", what, " has dtype ", t.dtype(),
                " but the input has ", input.dtype());
}

Layout validate(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                const Tensor& weight, const Tensor& bias, bool training) {
  RINGLET_CHECK(input.dim() >= 2, ShapeError, kOp,
                ": input must be [N, C] or [N, C, H, W] (rank >= 2), got shape ",
                shape_str(input.shape()));
  check_parameter(weight, "weight", input);
  check_parameter(bias, "bias", input);
  check_parameter(running_mean, "running_mean", input);
  check_parameter(running_var, "running_var", input);
  RINGLET_CHECK(running_mean.defined() == running_var.defined(), ValueError, kOp,
                ": running_mean and running_var must both be given or both be undefined");
  RINGLET_CHECK(training || running_mean.defined(), ValueError, kOp,
                ": eval mode needs running_mean and running_var");
  Layout layout{input.size(0), input.size(1), 1};
  for (std::int64_t d = 2; d < input.dim(); ++d) layout.spatial *= input.size(d);
  return layout;
}

// Per-channel statistics used for normalization: mean and 1 / sqrt(var + eps).
struct Stats {
  std::vector<double> mean, invstd;
};

// T's row in the level's loops (tensor/cpu/flat_loops.h): the sums in f64 with eight
// accumulators, the multiply-adds in T.
template <class T>
constexpr std::size_t kRow = std::is_same_v<T, float> ? 0 : 1;

// Per-channel sums of run_sum(c, run) over channel c's runs, channels in parallel.
template <class T, class F>
std::vector<double> channel_sums(const Layout& l, const T* data, F&& run_sum) {
  std::vector<double> sums(l.channels);
  core::parallel_for(l.channels, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t c = begin; c < end; ++c) {
      double total = 0;
      l.for_runs(data, c, [&](const T* run) { total += run_sum(c, run); });
      sums[c] = total;
    }
  });
  return sums;
}

// Mean and biased variance per channel in two passes (sum, then squared deviations from the
// mean); with a reducer both passes are summed across ranks. Returns the values per channel
// over all ranks in `count`.
template <class T>
Stats batch_stats(const Layout& l, const Tensor& x, double eps, std::vector<double>& var,
                  double& count, const StatsReducer& reducer) {
  const T* data = x.data<T>();
  constexpr std::size_t d = kRow<T>;
  const cpu::FlatLoops& loops = cpu::flat_loops();
  std::vector<double> sums = channel_sums(
      l, data, [&](std::int64_t, const T* run) { return loops.sum[d](run, l.spatial); });
  count = static_cast<double>(l.count());
  if (reducer) {
    sums.push_back(count);
    reducer(sums);
    count = sums.back();
    sums.pop_back();
  }
  Stats s{std::vector<double>(l.channels), std::vector<double>(l.channels)};
  for (std::int64_t c = 0; c < l.channels; ++c) s.mean[c] = count > 0 ? sums[c] / count : 0.0;
  var = channel_sums(l, data, [&](std::int64_t c, const T* run) {
    return loops.sum_sq_dev[d](run, l.spatial, s.mean[c]);
  });
  if (reducer) reducer(var);
  for (std::int64_t c = 0; c < l.channels; ++c) {
    var[c] = count > 0 ? var[c] / count : 0.0;
    s.invstd[c] = 1.0 / std::sqrt(var[c] + eps);
  }
  return s;
}

template <class T>
void update_running(const Layout& l, const std::vector<double>& mean,
                    const std::vector<double>& var, double count, double momentum,
                    Tensor& running_mean, Tensor& running_var) {
  T* rm = running_mean.data<T>();
  T* rv = running_var.data<T>();
  const std::int64_t sm = running_mean.stride(0), sv = running_var.stride(0);
  const double bessel = count / (count - 1);
  for (std::int64_t c = 0; c < l.channels; ++c) {
    rm[c * sm] = static_cast<T>((1 - momentum) * rm[c * sm] + momentum * mean[c]);
    rv[c * sv] = static_cast<T>((1 - momentum) * rv[c * sv] + momentum * var[c] * bessel);
  }
}

template <class T>
Tensor normalize(const Layout& l, const Tensor& x, const Stats& s, const Tensor& weight,
                 const Tensor& bias) {
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  const T* src = x.data<T>();
  T* dst = out.data<T>();
  const T* w = weight.defined() ? weight.data<T>() : nullptr;
  const T* b = bias.defined() ? bias.data<T>() : nullptr;
  const std::int64_t sw = w ? weight.stride(0) : 0, sb = b ? bias.stride(0) : 0;
  // The level's loop for one run: dst = src * scale + shift, both rounded to T first.
  const cpu::FlatLoops::Affine affine = cpu::flat_loops().affine[kRow<T>];
  core::parallel_for(l.channels, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t c = begin; c < end; ++c) {
      // y = (x - mean) * invstd * w + b, folded into one multiply-add per element.
      const double scale = s.invstd[c] * (w ? static_cast<double>(w[c * sw]) : 1.0);
      const double shift = (b ? static_cast<double>(b[c * sb]) : 0.0) - s.mean[c] * scale;
      const T a = static_cast<T>(scale), k = static_cast<T>(shift);
      for (std::int64_t n = 0; n < l.batch; ++n) {
        const std::int64_t at = (n * l.channels + c) * l.spatial;
        if (l.spatial >= kAffineCallMin) {
          affine(dst + at, src + at, l.spatial, scale, shift);
        } else {  // short runs (BatchNorm1d's are 1 long): not worth a call each
          for (std::int64_t i = 0; i < l.spatial; ++i) dst[at + i] = src[at + i] * a + k;
        }
      }
    }
  });
  return out;
}

struct Saved {
  Layout layout;
  Tensor input;   // contiguous, detached
  Tensor weight;  // detached; undefined means 1
  Stats stats;
  bool training;
  double count;          // values per channel the statistics came from (all ranks)
  StatsReducer reducer;  // set when synchronized
};

template <class T>
std::vector<Tensor> backward(const Saved& s, const Tensor& grad_output,
                             const std::vector<bool>& needs) {
  const Layout& l = s.layout;
  const Tensor go = grad_output.contiguous();
  std::vector<Tensor> grads(3);
  const DType dtype = go.dtype();
  if (needs[0]) grads[0] = Tensor::empty(s.input.shape(), dtype);
  if (needs[1]) grads[1] = Tensor::empty({l.channels}, dtype);
  if (needs[2]) grads[2] = Tensor::empty({l.channels}, dtype);
  const T* x = s.input.data<T>();
  const T* dy = go.data<T>();
  const T* w = s.weight.defined() ? s.weight.data<T>() : nullptr;
  const std::int64_t sw = w ? s.weight.stride(0) : 0;
  const bool need_sums = needs[1] || needs[2] || (needs[0] && s.training);
  std::vector<double> sum_dy, sum_dy_xhat;
  constexpr std::size_t d = kRow<T>;
  const cpu::FlatLoops& loops = cpu::flat_loops();
  if (need_sums) {  // both sums in one pass over dy and x, per run
    sum_dy.assign(l.channels, 0.0);
    sum_dy_xhat.assign(l.channels, 0.0);
    core::parallel_for(l.channels, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t c = begin; c < end; ++c) {
        double total = 0, dev_total = 0;
        for (std::int64_t n = 0; n < l.batch; ++n) {
          const std::int64_t at = (n * l.channels + c) * l.spatial;
          double run_sum, run_dev;
          loops.sums_dy[d](dy + at, x + at, l.spatial, s.stats.mean[c], &run_sum, &run_dev);
          total += run_sum;
          dev_total += run_dev;
        }
        sum_dy[c] = total;
        sum_dy_xhat[c] = dev_total * s.stats.invstd[c];
      }
    });
  }
  // Weight and bias gradients: this rank's sums. The input gradient of a synchronized
  // normalization goes through the global statistics, so it needs the global sums.
  for (std::int64_t c = 0; c < l.channels && (needs[1] || needs[2]); ++c) {
    if (needs[1]) grads[1].data<T>()[c] = static_cast<T>(sum_dy_xhat[c]);
    if (needs[2]) grads[2].data<T>()[c] = static_cast<T>(sum_dy[c]);
  }
  if (!needs[0]) return grads;
  if (s.training && s.reducer) {
    std::vector<double> both(sum_dy);
    both.insert(both.end(), sum_dy_xhat.begin(), sum_dy_xhat.end());
    s.reducer(both);
    std::copy(both.begin(), both.begin() + l.channels, sum_dy.begin());
    std::copy(both.begin() + l.channels, both.end(), sum_dy_xhat.begin());
  }
  const double count = s.count;
  core::parallel_for(l.channels, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t c = begin; c < end; ++c) {
      const double mean = s.stats.mean[c], invstd = s.stats.invstd[c];
      // dx = scale * (dy - mean(dy) - xhat * mean(dy * xhat)) in training; in eval the
      // statistics are constants and only dx = scale * dy remains. Folded per channel into
      // dx = a * dy + b * (x - mean) + k, evaluated in T.
      const double scale = invstd * (w ? static_cast<double>(w[c * sw]) : 1.0);
      const double dy_shift = s.training ? sum_dy[c] / count : 0.0;
      const double xhat_coef = s.training ? sum_dy_xhat[c] / count : 0.0;
      const T a = static_cast<T>(scale);
      const T b = static_cast<T>(-scale * invstd * xhat_coef);
      const T k = static_cast<T>(-scale * dy_shift);
      const T m = static_cast<T>(mean);
      T* dx = grads[0].data<T>();
      for (std::int64_t n = 0; n < l.batch; ++n) {
        const std::int64_t at = (n * l.channels + c) * l.spatial;
        if (l.spatial >= kAffineCallMin) {
          loops.norm_grad[d](dx + at, dy + at, x + at, l.spatial, a, b, m, k);
        } else {  // short runs: not worth a call each
          for (std::int64_t i = 0; i < l.spatial; ++i) {
            dx[at + i] = a * dy[at + i] + b * (x[at + i] - m) + k;
          }
        }
      }
    }
  });
  return grads;
}

// On a device (cuda, emu): the same arithmetic as above in device kernels (tensor/kernels/
// nn.h), so the emulated device matches the CPU bit for bit; the statistics stay on the
// device as f64 [C] tensors.
const void* data_or_null(const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; }
std::int64_t stride_or_zero(const Tensor& t) { return t.defined() ? t.stride(0) : 0; }

// A synchronized normalization's sums cross ranks through the host: the device's per-channel
// sums come back (waiting for the stream), the reducer sums them across ranks, and what is
// computed from them goes back to the device (as the CPU kernel's arithmetic, in f64).
// `extra` host values (the count) travel after the sums in the same reduction.
std::vector<double> reduced_on_host(const std::vector<Tensor>& sums, const StatsReducer& reducer,
                                    const std::vector<double>& extra = {}) {
  std::vector<double> host;
  for (const Tensor& t : sums) {
    const std::vector<double> part = t.to_vector<double>();
    host.insert(host.end(), part.begin(), part.end());
  }
  host.insert(host.end(), extra.begin(), extra.end());
  reducer(host);
  return host;
}

Tensor upload(const std::vector<double>& values, Device dev) {
  return from_vector(values, {static_cast<std::int64_t>(values.size())}, DType::f64).to(dev);
}

// Per-channel statistics on the device: mean, biased variance and 1 / sqrt(var + eps), over
// `count` values per channel (all ranks' when synchronized).
struct DeviceStats {
  Tensor mean, var, invstd;
  double count;
};

DeviceStats local_device_stats(const kernels::BnShape& l, const Tensor& x, double eps) {
  const Device dev = x.device();
  DeviceStats s{
      Tensor::empty({l.channels}, DType::f64, dev), Tensor::empty({l.channels}, DType::f64, dev),
      Tensor::empty({l.channels}, DType::f64, dev), static_cast<double>(l.batch * l.spatial)};
  Tensor partial = Tensor::empty({l.batch * l.channels}, DType::f64, dev);
  kernels_for(dev).batch_norm_stats(
      x.dtype(), l, eps, x.raw_data(), static_cast<double*>(s.mean.raw_data()),
      static_cast<double*>(s.var.raw_data()), static_cast<double*>(s.invstd.raw_data()),
      static_cast<double*>(partial.raw_data()), stream_for(dev));
  return s;
}

// SyncBatchNorm on a device: the sums of x, then of the squared deviations from the global
// mean, each reduced across ranks (the count with the first), as batch_stats on the CPU.
DeviceStats synced_device_stats(const kernels::BnShape& l, const Tensor& x, double eps,
                                const StatsReducer& reducer) {
  const Device dev = x.device();
  auto& k = kernels_for(dev);
  Tensor partial = Tensor::empty({l.batch * l.channels}, DType::f64, dev);
  Tensor sums = Tensor::empty({l.channels}, DType::f64, dev);
  const auto channel_sums = [&](bool centered, const Tensor& mean) {
    k.batch_norm_channel_sums(x.dtype(), l, centered, x.raw_data(),
                              centered ? static_cast<const double*>(mean.raw_data()) : nullptr,
                              static_cast<double*>(sums.raw_data()),
                              static_cast<double*>(partial.raw_data()), stream_for(dev));
  };
  channel_sums(false, Tensor());
  std::vector<double> total =
      reduced_on_host({sums}, reducer, {static_cast<double>(l.batch * l.spatial)});
  const double count = total.back();
  std::vector<double> mean(l.channels), var(l.channels), invstd(l.channels);
  for (std::int64_t c = 0; c < l.channels; ++c) mean[c] = count > 0 ? total[c] / count : 0.0;
  DeviceStats s{upload(mean, dev), Tensor(), Tensor(), count};
  channel_sums(true, s.mean);
  total = reduced_on_host({sums}, reducer);
  for (std::int64_t c = 0; c < l.channels; ++c) {
    var[c] = count > 0 ? total[c] / count : 0.0;
    invstd[c] = 1.0 / std::sqrt(var[c] + eps);
  }
  s.var = upload(var, dev);
  s.invstd = upload(invstd, dev);
  return s;
}

std::vector<Tensor> batch_norm_device_backward(const kernels::BnShape& l, const Tensor& x,
                                               const Tensor& w, const DeviceStats& stats,
                                               bool training, const StatsReducer& reducer,
                                               const Tensor& grad_output,
                                               const std::vector<bool>& needs) {
  const Tensor go = grad_output.contiguous();
  const Device dev = go.device();
  auto& k = kernels_for(dev);
  const auto* mean = static_cast<const double*>(stats.mean.raw_data());
  const auto* invstd = static_cast<const double*>(stats.invstd.raw_data());
  std::vector<Tensor> grads(3);
  Tensor sum_dy, sum_dy_xhat;
  if (needs[1] || needs[2] || (needs[0] && training)) {
    sum_dy = Tensor::empty({l.channels}, DType::f64, dev);
    sum_dy_xhat = Tensor::empty({l.channels}, DType::f64, dev);
    Tensor partial = Tensor::empty({2 * l.batch * l.channels}, DType::f64, dev);
    k.batch_norm_backward_sums(go.dtype(), l, x.raw_data(), go.raw_data(), mean, invstd,
                               static_cast<double*>(sum_dy.raw_data()),
                               static_cast<double*>(sum_dy_xhat.raw_data()),
                               static_cast<double*>(partial.raw_data()), stream_for(dev));
  }
  // Weight and bias gradients: this rank's sums; the input gradient of a synchronized
  // normalization goes through the global statistics, so through the global sums.
  if (needs[1]) grads[1] = sum_dy_xhat.to(go.dtype());
  if (needs[2]) grads[2] = sum_dy.to(go.dtype());
  if (!needs[0]) return grads;
  if (training && reducer) {
    const std::vector<double> both = reduced_on_host({sum_dy, sum_dy_xhat}, reducer);
    sum_dy = upload({both.begin(), both.begin() + l.channels}, dev);
    sum_dy_xhat = upload({both.begin() + l.channels, both.end()}, dev);
  }
  grads[0] = Tensor::empty(x.shape(), go.dtype(), dev);
  k.batch_norm_backward_input(
      go.dtype(), l, x.raw_data(), go.raw_data(), mean, invstd, data_or_null(w), stride_or_zero(w),
      training ? static_cast<const double*>(sum_dy.raw_data()) : nullptr,
      training ? static_cast<const double*>(sum_dy_xhat.raw_data()) : nullptr, stats.count,
      training, grads[0].raw_data(), stream_for(dev));
  return grads;
}

// The statistics the normalization uses: the batch's (local or synchronized) in training,
// updating the running statistics; the running statistics in evaluation.
DeviceStats device_stats(const kernels::BnShape& l, const Tensor& x, Tensor& running_mean,
                         Tensor& running_var, bool training, double momentum, double eps,
                         const StatsReducer& sync, const Tensor& input) {
  const Device dev = x.device();
  auto& k = kernels_for(dev);
  if (!training) {
    DeviceStats s{Tensor::empty({l.channels}, DType::f64, dev), Tensor(),
                  Tensor::empty({l.channels}, DType::f64, dev),
                  static_cast<double>(l.batch * l.spatial)};
    k.batch_norm_eval_stats(x.dtype(), l.channels, eps, running_mean.raw_data(),
                            running_mean.stride(0), running_var.raw_data(), running_var.stride(0),
                            static_cast<double*>(s.mean.raw_data()),
                            static_cast<double*>(s.invstd.raw_data()), stream_for(dev));
    return s;
  }
  // An empty batch has no statistics: the output is empty and the running stats stay.
  // (Synchronized, every rank takes part in the reductions even with an empty batch.)
  if (l.batch * l.spatial == 0 && !sync) {
    DeviceStats s{zeros({l.channels}, DType::f64, dev), Tensor(),
                  ones({l.channels}, DType::f64, dev), 0.0};
    return s;
  }
  DeviceStats s = sync ? synced_device_stats(l, x, eps, sync) : local_device_stats(l, x, eps);
  RINGLET_CHECK(s.count > 1, ValueError, kOp,
                ": expected more than 1 value per channel when training, got input shape ",
                shape_str(input.shape()), sync ? " (over all ranks: " : "",
                sync ? core::str(s.count, " values)") : "");
  if (running_mean.defined()) {
    k.batch_norm_update_running(
        x.dtype(), l.channels, momentum, s.count, static_cast<const double*>(s.mean.raw_data()),
        static_cast<const double*>(s.var.raw_data()), running_mean.raw_data(),
        running_mean.stride(0), running_var.raw_data(), running_var.stride(0), stream_for(dev));
  }
  return s;
}

Tensor batch_norm_device(const Layout& layout, const Tensor& input, Tensor running_mean,
                         Tensor running_var, const Tensor& weight, const Tensor& bias,
                         bool training, double momentum, double eps, const StatsReducer& reducer) {
  RINGLET_CHECK(input.dtype() == DType::f32 || input.dtype() == DType::f64, DTypeError, kOp,
                ": dtype ", input.dtype(), " is not supported (f32 and f64 are)");
  const kernels::BnShape l{layout.batch, layout.channels, layout.spatial};
  const Tensor x = input.detach().contiguous();
  const Device dev = x.device();
  const StatsReducer sync = training ? reducer : StatsReducer();
  const DeviceStats stats =
      device_stats(l, x, running_mean, running_var, training, momentum, eps, sync, input);
  const Tensor w = weight.defined() ? weight.detach() : Tensor();
  const Tensor b = bias.defined() ? bias.detach() : Tensor();
  Tensor out = Tensor::empty(x.shape(), x.dtype(), dev);
  kernels_for(dev).batch_norm_normalize(
      x.dtype(), l, x.raw_data(), static_cast<const double*>(stats.mean.raw_data()),
      static_cast<const double*>(stats.invstd.raw_data()), data_or_null(w), stride_or_zero(w),
      data_or_null(b), stride_or_zero(b), out.raw_data(), stream_for(dev));
  if (!any_requires_grad({input, weight, bias})) return out;
  return record(
      kOp, out, {input, weight, bias},
      [l, x, w, stats, training, sync](const Tensor& grad_output, const std::vector<bool>& needs) {
        return batch_norm_device_backward(l, x, w, stats, training, sync, grad_output, needs);
      });
}

}  // namespace

Tensor batch_norm(const Tensor& input, Tensor running_mean, Tensor running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps, const StatsReducer& reducer) {
  const Layout l = validate(input, running_mean, running_var, weight, bias, training);
  if (!input.device().is_cpu()) {
    return batch_norm_device(l, input, running_mean, running_var, weight, bias, training, momentum,
                             eps, reducer);
  }
  const Tensor x = input.detach().contiguous();
  const Tensor w = weight.defined() ? weight.detach() : Tensor();
  const StatsReducer sync = training ? reducer : StatsReducer();
  Tensor out;
  Stats stats;
  double count = static_cast<double>(l.count());
  cpu::dispatch_floating(x.dtype(), kOp, [&]<class T>() {
    if (training) {
      // An empty batch has no statistics: the output is empty and the running stats stay.
      // (Synchronized, every rank takes part in the reductions even with an empty batch.)
      if (l.count() == 0 && !sync) {
        stats = Stats{std::vector<double>(l.channels), std::vector<double>(l.channels, 1.0)};
      } else {
        std::vector<double> var;
        stats = batch_stats<T>(l, x, eps, var, count, sync);
        RINGLET_CHECK(count > 1, ValueError, kOp,
                      ": expected more than 1 value per channel when training, got input shape ",
                      shape_str(input.shape()), sync ? " (over all ranks: " : "",
                      sync ? core::str(count, " values)") : "");
        if (running_mean.defined()) {
          update_running<T>(l, stats.mean, var, count, momentum, running_mean, running_var);
        }
      }
    } else {
      const Tensor rm = running_mean.contiguous(), rv = running_var.contiguous();
      stats = Stats{std::vector<double>(l.channels), std::vector<double>(l.channels)};
      for (std::int64_t c = 0; c < l.channels; ++c) {
        stats.mean[c] = rm.data<T>()[c];
        stats.invstd[c] = 1.0 / std::sqrt(static_cast<double>(rv.data<T>()[c]) + eps);
      }
    }
    out = normalize<T>(l, x, stats, w, bias.defined() ? bias.detach() : Tensor());
  });
  if (!any_requires_grad({input, weight, bias})) return out;
  auto saved = std::make_shared<Saved>(Saved{l, x, w, std::move(stats), training, count, sync});
  return record(kOp, out, {input, weight, bias},
                [saved](const Tensor& grad_output, const std::vector<bool>& needs) {
                  return cpu::dispatch_floating(grad_output.dtype(), kOp, [&]<class T>() {
                    return backward<T>(*saved, grad_output, needs);
                  });
                });
}

}  // namespace ringlet::tensor
