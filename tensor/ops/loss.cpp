// Losses on CPU: cross_entropy (log_softmax fused with the NLL, label smoothing as PyTorch
// defines it), nll_loss and mse_loss, with backward rules. Class targets are validated (i64,
// shape [N], every value in [0, C)) before any arithmetic; a bad value is reported with its
// position. cross_entropy saves one log-sum-exp per row for backward, not the probabilities.
#include "tensor/ops/loss.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "device/sticky_error.h"
#include "tensor/autograd.h"
#include "tensor/cpu/dispatch.h"
#include "tensor/ops/creation.h"
#include "tensor/ops/device_dispatch.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/index.h"
#include "tensor/ops/reduce.h"

namespace ringlet::tensor {
namespace {

void require_floating(const Tensor& t, const char* op) {
  RINGLET_CHECK(t.dtype() == DType::f32 || t.dtype() == DType::f64, DTypeError, op, ": dtype ",
                t.dtype(), " is not supported (f32 and f64 are); input shape ",
                shape_str(t.shape()));
}

// input [N, C] floating and target i64 [N] on the same device.
void check_class_inputs(const char* op, const Tensor& input, const Tensor& target) {
  RINGLET_CHECK(input.dim() == 2, ShapeError, op, ": input must be [N, C], got shape ",
                shape_str(input.shape()));
  require_floating(input, op);
  RINGLET_CHECK(target.dtype() == DType::i64, DTypeError, op,
                ": target must hold i64 class indices, got dtype ", target.dtype(), " (shape ",
                shape_str(target.shape()), ")");
  RINGLET_CHECK(target.dim() == 1 && target.size(0) == input.size(0), ShapeError, op,
                ": target of shape ", shape_str(target.shape()), " does not match input of shape ",
                shape_str(input.shape()), " (expected [", input.size(0), "])");
  RINGLET_CHECK(target.device() == input.device(), DeviceError, op, ": input on ", input.device(),
                " but target on ", target.device());
}

// The target's values, each checked to lie in [0, classes).
std::vector<std::int64_t> class_indices(const char* op, const Tensor& target,
                                        std::int64_t classes) {
  std::vector<std::int64_t> labels = target.to_vector<std::int64_t>();
  for (std::size_t i = 0; i < labels.size(); ++i) {
    RINGLET_CHECK(labels[i] >= 0 && labels[i] < classes, ValueError, op, ": target[", i,
                  "] = ", labels[i], " is out of range for ", classes, " classes (expected [0, ",
                  classes, "))");
  }
  return labels;
}

// Per-sample losses [N] reduced as asked; mean over N = 0 samples is NaN (as PyTorch).
Tensor reduce_losses(const Tensor& per_sample, Reduction reduction) {
  switch (reduction) {
    case Reduction::none: return per_sample;
    case Reduction::sum: return sum(per_sample);
    case Reduction::mean: return mean(per_sample);
  }
  RINGLET_THROW(ValueError, "unknown reduction ", static_cast<int>(reduction));
}

// d(reduced loss)/d(loss_i) times the incoming gradient, for each of n samples.
std::vector<double> per_sample_scale(const Tensor& g, Reduction reduction, std::int64_t n) {
  if (reduction == Reduction::none) return g.to_vector<double>();
  const double scale = reduction == Reduction::mean ? g.item() / static_cast<double>(n) : g.item();
  return std::vector<double>(static_cast<std::size_t>(n), scale);
}

// Labels on a device, checked there: a bad one sets the device's sticky error, which the host
// sees at its next synchronization (no read of its own here).
Tensor device_labels(device::StickyCode code, const Tensor& target, std::int64_t classes) {
  const Tensor labels = target.to(DType::i64).contiguous();
  const Device dev = labels.device();
  kernels_for(dev).check_labels(
      labels.numel(), classes, static_cast<const std::int64_t*>(labels.raw_data()),
      device::sticky_error_words(dev), static_cast<std::uint64_t>(code), stream_for(dev));
  return labels;
}

Tensor cross_entropy_device(const Tensor& logits, const Tensor& target, Reduction reduction,
                            double eps) {
  require_floating(logits, "cross_entropy");
  const std::int64_t n = logits.size(0), classes = logits.size(1);
  const Tensor labels = device_labels(device::StickyCode::cross_entropy_label, target, classes);
  const Tensor x = logits.detach().contiguous();
  Tensor per_sample = Tensor::empty({n}, x.dtype(), x.device());
  Tensor lse = Tensor::empty({n}, DType::f64, x.device());
  kernels_for(x.device())
      .cross_entropy(x.dtype(), n, classes, eps, x.raw_data(),
                     static_cast<const std::int64_t*>(labels.raw_data()), per_sample.raw_data(),
                     static_cast<double*>(lse.raw_data()), stream_for(x.device()));
  Tensor out;
  {
    NoGradGuard no_grad;
    out = reduce_losses(per_sample, reduction);
  }
  const int mode = reduction == Reduction::none ? 0 : reduction == Reduction::sum ? 1 : 2;
  return record("CrossEntropyBackward", out, {logits},
                [x, labels, lse, mode, eps](const Tensor& g, const std::vector<bool>&) {
                  const Tensor gc = g.contiguous();
                  Tensor grad = Tensor::empty(x.shape(), x.dtype(), x.device());
                  kernels_for(x.device())
                      .cross_entropy_backward(
                          x.dtype(), x.size(0), x.size(1), eps, mode, x.raw_data(),
                          static_cast<const std::int64_t*>(labels.raw_data()),
                          static_cast<const double*>(lse.raw_data()), gc.raw_data(),
                          grad.raw_data(), stream_for(x.device()));
                  return std::vector<Tensor>{grad};
                });
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& target, Reduction reduction,
                     double label_smoothing) {
  check_class_inputs("cross_entropy", logits, target);
  RINGLET_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0, ValueError,
                "cross_entropy: label_smoothing must be in [0, 1], got ", label_smoothing);
  if (!logits.device().is_cpu())
    return cross_entropy_device(logits, target, reduction, label_smoothing);
  const std::int64_t n = logits.size(0), classes = logits.size(1);
  const auto labels = class_indices("cross_entropy", target, classes);
  const std::int64_t s0 = logits.stride(0), s1 = logits.stride(1);
  // loss_i = (1 - eps) * (lse_i - x[i, t_i]) + eps / C * sum_j (lse_i - x[i, j])
  const double eps = label_smoothing;
  Tensor per_sample = Tensor::empty({n}, logits.dtype());
  std::vector<double> lse(static_cast<std::size_t>(n));
  cpu::dispatch_floating(logits.dtype(), "cross_entropy", [&]<class T>() {
    const T* x = logits.data<T>();
    T* loss = per_sample.data<T>();
    for (std::int64_t i = 0; i < n; ++i) {
      const T* row = x + i * s0;
      double top = -std::numeric_limits<double>::infinity();
      for (std::int64_t j = 0; j < classes; ++j) top = std::max(top, double(row[j * s1]));
      double total = 0.0, row_sum = 0.0;
      for (std::int64_t j = 0; j < classes; ++j) {
        total += std::exp(double(row[j * s1]) - top);
        row_sum += double(row[j * s1]);
      }
      lse[i] = top + std::log(total);
      const double nll = lse[i] - double(row[labels[i] * s1]);
      const double smooth = double(classes) * lse[i] - row_sum;
      // Without smoothing its term is left out, not multiplied by 0: a -inf logit makes it inf.
      const double value = (1.0 - eps) * nll + (eps != 0.0 ? eps / double(classes) * smooth : 0.0);
      loss[i] = static_cast<T>(value);
    }
  });
  Tensor out;
  {
    NoGradGuard no_grad;
    out = reduce_losses(per_sample, reduction);
  }
  return record("CrossEntropyBackward", out, {logits},
                [x = logits.detach(), labels, lse, reduction, eps](const Tensor& g,
                                                                   const std::vector<bool>&) {
                  const std::int64_t rows = x.size(0), classes = x.size(1);
                  const std::int64_t s0 = x.stride(0), s1 = x.stride(1);
                  const auto scale = per_sample_scale(g, reduction, rows);
                  Tensor grad = Tensor::empty(x.shape(), x.dtype());
                  // d loss_i / d x_ij = softmax_ij - (1 - eps) [j == t_i] - eps / C
                  cpu::dispatch_floating(x.dtype(), "cross_entropy backward", [&]<class T>() {
                    const T* in = x.data<T>();
                    T* dst = grad.data<T>();
                    for (std::int64_t i = 0; i < rows; ++i) {
                      for (std::int64_t j = 0; j < classes; ++j) {
                        double d =
                            std::exp(double(in[i * s0 + j * s1]) - lse[i]) - eps / double(classes);
                        if (j == labels[i]) d -= 1.0 - eps;
                        dst[i * classes + j] = static_cast<T>(scale[i] * d);
                      }
                    }
                  });
                  return std::vector<Tensor>{grad};
                });
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, Reduction reduction) {
  check_class_inputs("nll_loss", log_probs, target);
  if (!log_probs.device().is_cpu()) {
    // -log_probs[i, target_i], by a gather (whose backward scatters the gradient back).
    require_floating(log_probs, "nll_loss");
    const Tensor labels =
        device_labels(device::StickyCode::nll_loss_label, target, log_probs.size(1));
    const Tensor picked = gather(log_probs, 1, labels.view({labels.numel(), 1}));
    return reduce_losses(neg(picked.view({labels.numel()})), reduction);
  }
  const std::int64_t n = log_probs.size(0), classes = log_probs.size(1);
  const auto labels = class_indices("nll_loss", target, classes);
  const std::int64_t s0 = log_probs.stride(0), s1 = log_probs.stride(1);
  Tensor per_sample = Tensor::empty({n}, log_probs.dtype());
  cpu::dispatch_floating(log_probs.dtype(), "nll_loss", [&]<class T>() {
    const T* x = log_probs.data<T>();
    T* loss = per_sample.data<T>();
    for (std::int64_t i = 0; i < n; ++i) loss[i] = -x[i * s0 + labels[i] * s1];
  });
  Tensor out;
  {
    NoGradGuard no_grad;
    out = reduce_losses(per_sample, reduction);
  }
  return record("NllLossBackward", out, {log_probs},
                [shape = log_probs.shape(), dtype = log_probs.dtype(), labels, reduction](
                    const Tensor& g, const std::vector<bool>&) {
                  const auto scale = per_sample_scale(g, reduction, shape[0]);
                  Tensor grad = zeros(shape, dtype);
                  cpu::dispatch_floating(dtype, "nll_loss backward", [&]<class T>() {
                    T* dst = grad.data<T>();
                    for (std::int64_t i = 0; i < shape[0]; ++i) {
                      dst[i * shape[1] + labels[i]] = static_cast<T>(-scale[i]);
                    }
                  });
                  return std::vector<Tensor>{grad};
                });
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  RINGLET_CHECK(input.shape() == target.shape(), ShapeError, "mse_loss: input of shape ",
                shape_str(input.shape()), " and target of shape ", shape_str(target.shape()),
                " differ");
  RINGLET_CHECK(input.dtype() == target.dtype(), DTypeError, "mse_loss: input dtype ",
                input.dtype(), " and target dtype ", target.dtype(), " differ");
  require_floating(input, "mse_loss");
  RINGLET_CHECK(input.device() == target.device(), DeviceError, "mse_loss: input on ",
                input.device(), " but target on ", target.device());
  Tensor diff, out;  // elementwise ops and a reduction: the same on every device
  {
    NoGradGuard no_grad;
    diff = sub(input.detach(), target.detach());
    out = reduce_losses(mul(diff, diff), reduction);
  }
  return record(
      "MseLossBackward", out, {input, target},
      [diff, reduction](const Tensor& g, const std::vector<bool>& needs) {
        const double n = static_cast<double>(diff.numel());
        const Tensor scale = reduction == Reduction::mean ? mul(g, 2.0 / n) : mul(g, 2.0);
        const Tensor gx = mul(diff, scale);
        return std::vector<Tensor>{needs[0] ? gx : Tensor(), needs[1] ? neg(gx) : Tensor()};
      });
}

}  // namespace ringlet::tensor
