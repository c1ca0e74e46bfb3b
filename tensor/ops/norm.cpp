// batch_norm on the CPU over [N, C, *]: statistics per channel over the batch and trailing
// dims, channels in parallel. Training normalizes with the batch mean and biased variance and
// updates the running statistics in place as PyTorch does (running = (1 - momentum) * running
// + momentum * stat, with the unbiased variance). Statistics accumulate in f64, in two passes.
// The training backward goes through the batch statistics:
//   dx = w * invstd * (dy - mean(dy) - xhat * mean(dy * xhat)).
// Unsynchronized, each channel's passes run back to back (statistics then normalization; the
// backward's sums then dx), so all but the first read its values from cache; with a reducer
// every channel's sums come first, to be reduced across ranks. Both give the same bits.
// On a device (cuda, emu) the same arithmetic runs as device kernels (batch_norm_device); a
// synchronized normalization's sums go through the host to the reducer and back.
#include "tensor/ops/norm.h"

#include <cmath>
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

// fn(c) for every channel c, channels in parallel, into a vector.
template <class F>
std::vector<double> per_channel(const Layout& l, F&& fn) {
  std::vector<double> values(l.channels);
  core::parallel_for(l.channels, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t c = begin; c < end; ++c) values[c] = fn(c);
  });
  return values;
}

// Channel c's sum over its runs, and its sum of squared deviations from `mean`, by the level's
// loops (f64, eight accumulators per run).
template <class T>
double channel_sum(const Layout& l, const T* data, std::int64_t c) {
  const cpu::FlatLoops::Sum sum = cpu::flat_loops().sum[cpu::kFlatRow<T>];
  double total = 0;
  l.for_runs(data, c, [&](const T* run) { total += sum(run, l.spatial); });
  return total;
}

template <class T>
double channel_sum_sq_dev(const Layout& l, const T* data, std::int64_t c, double mean) {
  const cpu::FlatLoops::SumDev sum_sq_dev = cpu::flat_loops().sum_sq_dev[cpu::kFlatRow<T>];
  double total = 0;
  l.for_runs(data, c, [&](const T* run) { total += sum_sq_dev(run, l.spatial, mean); });
  return total;
}

// Mean and biased variance per channel in two passes (sum, then squared deviations from the
// mean), every channel's first pass before any second one: with a reducer both passes are
// summed across ranks in between. Returns the values per channel over all ranks in `count`.
template <class T>
Stats batch_stats(const Layout& l, const Tensor& x, double eps, std::vector<double>& var,
                  double& count, const StatsReducer& reducer) {
  const T* data = x.data<T>();
  std::vector<double> sums =
      per_channel(l, [&](std::int64_t c) { return channel_sum(l, data, c); });
  count = static_cast<double>(l.count());
  if (reducer) {
    sums.push_back(count);
    reducer(sums);
    count = sums.back();
    sums.pop_back();
  }
  Stats s{std::vector<double>(l.channels), std::vector<double>(l.channels)};
  for (std::int64_t c = 0; c < l.channels; ++c) s.mean[c] = count > 0 ? sums[c] / count : 0.0;
  var = per_channel(l, [&](std::int64_t c) { return channel_sum_sq_dev(l, data, c, s.mean[c]); });
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

// The forward's y = (x - mean) * invstd * w + b, folded per channel into one multiply-add per
// element, dst = src * scale + shift, both rounded to T first.
template <class T>
class Normalizer {
 public:
  Normalizer(const Layout& l, const Tensor& x, const Tensor& weight, const Tensor& bias,
             Tensor& out)
      : l_(l),
        src_(x.data<T>()),
        dst_(out.data<T>()),
        w_(weight.defined() ? weight.data<T>() : nullptr),
        b_(bias.defined() ? bias.data<T>() : nullptr),
        sw_(w_ ? weight.stride(0) : 0),
        sb_(b_ ? bias.stride(0) : 0),
        affine_(cpu::flat_loops().affine[cpu::kFlatRow<T>]) {}

  void channel(std::int64_t c, double mean, double invstd) const {
    const double scale = invstd * (w_ ? static_cast<double>(w_[c * sw_]) : 1.0);
    const double shift = (b_ ? static_cast<double>(b_[c * sb_]) : 0.0) - mean * scale;
    const T a = static_cast<T>(scale), k = static_cast<T>(shift);
    for (std::int64_t n = 0; n < l_.batch; ++n) {
      const std::int64_t at = (n * l_.channels + c) * l_.spatial;
      if (l_.spatial >= kAffineCallMin) {
        affine_(dst_ + at, src_ + at, l_.spatial, scale, shift);
      } else {  // short runs (BatchNorm1d's are 1 long): not worth a call each
        for (std::int64_t i = 0; i < l_.spatial; ++i) dst_[at + i] = src_[at + i] * a + k;
      }
    }
  }

 private:
  const Layout& l_;
  const T* src_;
  T* dst_;
  const T* w_;
  const T* b_;
  std::int64_t sw_, sb_;
  cpu::FlatLoops::Affine affine_;
};

template <class T>
Tensor normalize(const Layout& l, const Tensor& x, const Stats& s, const Tensor& weight,
                 const Tensor& bias) {
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  const Normalizer<T> normalizer(l, x, weight, bias, out);
  core::parallel_for(l.channels, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t c = begin; c < end; ++c) normalizer.channel(c, s.mean[c], s.invstd[c]);
  });
  return out;
}

// Training without a reducer: batch_stats then normalize, one channel at a time (each
// channel's statistics are its own), so that the second pass over a channel's values and its
// normalization read them from cache rather than memory. The same arithmetic, the same bits.
template <class T>
Stats local_stats_and_normalize(const Layout& l, const Tensor& x, double eps, const Tensor& weight,
                                const Tensor& bias, std::vector<double>& var, Tensor& out) {
  const T* data = x.data<T>();
  const double count = static_cast<double>(l.count());
  out = Tensor::empty(x.shape(), x.dtype());
  const Normalizer<T> normalizer(l, x, weight, bias, out);
  Stats s{std::vector<double>(l.channels), std::vector<double>(l.channels)};
  var.assign(l.channels, 0.0);
  core::parallel_for(l.channels, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t c = begin; c < end; ++c) {
      s.mean[c] = channel_sum(l, data, c) / count;
      var[c] = channel_sum_sq_dev(l, data, c, s.mean[c]) / count;
      s.invstd[c] = 1.0 / std::sqrt(var[c] + eps);
      normalizer.channel(c, s.mean[c], s.invstd[c]);
    }
  });
  return s;
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

// The training backward's two sums for channel c in one pass over dy and x per run: sum dy
// and sum dy * xhat (xhat = (x - mean) * invstd).
template <class T>
void channel_sums_dy(const Saved& s, const T* dy, const T* x, std::int64_t c, double& sum_dy,
                     double& sum_dy_xhat) {
  const Layout& l = s.layout;
  const cpu::FlatLoops::SumsDy sums_dy = cpu::flat_loops().sums_dy[cpu::kFlatRow<T>];
  double total = 0, dev_total = 0;
  for (std::int64_t n = 0; n < l.batch; ++n) {
    const std::int64_t at = (n * l.channels + c) * l.spatial;
    double run_sum, run_dev;
    sums_dy(dy + at, x + at, l.spatial, s.stats.mean[c], &run_sum, &run_dev);
    total += run_sum;
    dev_total += run_dev;
  }
  sum_dy = total;
  sum_dy_xhat = dev_total * s.stats.invstd[c];
}

// Channel c's input gradient: dx = scale * (dy - mean(dy) - xhat * mean(dy * xhat)) in
// training; in eval the statistics are constants and only dx = scale * dy remains (x unread, so
// a NaN input passes no NaN back, as PyTorch's). Folded into dx = a * dy + b * (x - mean) + k,
// evaluated in T.
template <class T>
void channel_input_grad(const Saved& s, const T* dy, const T* x, std::int64_t c, double sum_dy,
                        double sum_dy_xhat, T* dx) {
  const Layout& l = s.layout;
  const double mean = s.stats.mean[c], invstd = s.stats.invstd[c];
  const T* w = s.weight.defined() ? s.weight.data<T>() : nullptr;
  const double scale = invstd * (w ? static_cast<double>(w[c * s.weight.stride(0)]) : 1.0);
  const double dy_shift = s.training ? sum_dy / s.count : 0.0;
  const double xhat_coef = s.training ? sum_dy_xhat / s.count : 0.0;
  const T a = static_cast<T>(scale);
  const T b = static_cast<T>(-scale * invstd * xhat_coef);
  const T k = static_cast<T>(-scale * dy_shift);
  const T m = static_cast<T>(mean);
  const cpu::FlatLoops::NormGrad norm_grad = cpu::flat_loops().norm_grad[cpu::kFlatRow<T>];
  for (std::int64_t n = 0; n < l.batch; ++n) {
    const std::int64_t at = (n * l.channels + c) * l.spatial;
    if (!s.training) {
      for (std::int64_t i = 0; i < l.spatial; ++i) dx[at + i] = a * dy[at + i];
    } else if (l.spatial >= kAffineCallMin) {
      norm_grad(dx + at, dy + at, x + at, l.spatial, a, b, m, k);
    } else {  // short runs: not worth a call each
      for (std::int64_t i = 0; i < l.spatial; ++i) {
        dx[at + i] = a * dy[at + i] + b * (x[at + i] - m) + k;
      }
    }
  }
}

// The sums, then the input gradient. The input gradient of a synchronized normalization goes
// through the global statistics, so it needs the sums over all ranks: every channel's sums
// first, reduced, then every channel's gradient. Otherwise one channel at a time, its sums and
// its gradient back to back, its dy and x read from cache the second time.
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
  T* dx = needs[0] ? grads[0].data<T>() : nullptr;
  const bool need_sums = needs[1] || needs[2] || (needs[0] && s.training);
  const bool global = s.training && s.reducer;
  std::vector<double> sum_dy(l.channels, 0.0), sum_dy_xhat(l.channels, 0.0);
  const auto sums = [&](std::int64_t c) {
    if (need_sums) channel_sums_dy(s, dy, x, c, sum_dy[c], sum_dy_xhat[c]);
  };
  const auto input_grad = [&](std::int64_t c) {
    channel_input_grad(s, dy, x, c, sum_dy[c], sum_dy_xhat[c], dx);
  };
  core::parallel_for(l.channels, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t c = begin; c < end; ++c) {
      sums(c);
      if (needs[0] && !global) input_grad(c);
    }
  });
  // Weight and bias gradients: this rank's sums.
  for (std::int64_t c = 0; c < l.channels && (needs[1] || needs[2]); ++c) {
    if (needs[1]) grads[1].data<T>()[c] = static_cast<T>(sum_dy_xhat[c]);
    if (needs[2]) grads[2].data<T>()[c] = static_cast<T>(sum_dy[c]);
  }
  if (needs[0] && global) {
    std::vector<double> both(sum_dy);
    both.insert(both.end(), sum_dy_xhat.begin(), sum_dy_xhat.end());
    s.reducer(both);
    std::copy(both.begin(), both.begin() + l.channels, sum_dy.begin());
    std::copy(both.begin() + l.channels, both.end(), sum_dy_xhat.begin());
    core::parallel_for(l.channels, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t c = begin; c < end; ++c) input_grad(c);
    });
  }
  return grads;
}

// Training needs more than one value per channel (over all ranks when synchronized).
void check_count(double count, const Tensor& input, bool sync) {
  RINGLET_CHECK(count > 1, ValueError, kOp,
                ": expected more than 1 value per channel when training, got input shape ",
                shape_str(input.shape()), sync ? " (over all ranks: " : "",
                sync ? core::str(count, " values)") : "");
}

Tensor bias_of(const Tensor& bias) { return bias.defined() ? bias.detach() : Tensor(); }

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
                         bool training, double momentum, double eps, const StatsReducer& reducer,
                         Activation act) {
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
      data_or_null(b), stride_or_zero(b), out.raw_data(), act, stream_for(dev));
  if (!any_requires_grad({input, weight, bias})) return out;
  // With the ReLU in the kernel, the backward masks the gradient with the output first.
  const Tensor relu_out = act == Activation::relu ? out.detach() : Tensor();
  return record(kOp, out, {input, weight, bias},
                [l, x, w, stats, training, sync, relu_out](const Tensor& grad_output,
                                                           const std::vector<bool>& needs) {
                  const Tensor g =
                      relu_out.defined() ? relu_gradient(grad_output, relu_out) : grad_output;
                  return batch_norm_device_backward(l, x, w, stats, training, sync, g, needs);
                });
}

}  // namespace

Tensor batch_norm(const Tensor& input, Tensor running_mean, Tensor running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps, const StatsReducer& reducer, Activation act) {
  if (!input.device().is_cpu()) {
    const Layout l = validate(input, running_mean, running_var, weight, bias, training);
    return batch_norm_device(l, input, running_mean, running_var, weight, bias, training, momentum,
                             eps, reducer, act);
  }
  const Tensor out = batch_norm(input, std::move(running_mean), std::move(running_var), weight,
                                bias, training, momentum, eps, reducer);
  return act == Activation::relu ? relu(out) : out;
}

Tensor batch_norm(const Tensor& input, Tensor running_mean, Tensor running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps, const StatsReducer& reducer) {
  const Layout l = validate(input, running_mean, running_var, weight, bias, training);
  if (!input.device().is_cpu()) {
    return batch_norm_device(l, input, running_mean, running_var, weight, bias, training, momentum,
                             eps, reducer, Activation::none);
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
        if (sync) {
          stats = batch_stats<T>(l, x, eps, var, count, sync);
          check_count(count, input, true);
        } else {
          check_count(count, input, false);
          stats = local_stats_and_normalize<T>(l, x, eps, w, bias_of(bias), var, out);
        }
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
    if (!out.defined()) out = normalize<T>(l, x, stats, w, bias_of(bias));
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
