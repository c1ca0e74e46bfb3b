// GradScaler, following torch.cuda.amp.GradScaler (PyTorch 1.13): the inverse scale is the
// double reciprocal rounded to f32 (_amp_foreach_non_finite_check_and_unscale_ multiplies by
// it), the inf/NaN check looks at the scaled values, and _amp_update_scale_ does the growth and
// backoff, keeping a growth that would overflow at the old scale.
#include "nn/grad_scaler.h"

#include <cmath>
#include <string>

#include "core/error.h"
#include "tensor/ops.h"

namespace ringlet::nn {

using tensor::Tensor;

namespace {

// g *= inv in place; returns whether any element of g was inf or NaN.
template <class T>
bool unscale_in_place(const Tensor& g, float inv) {
  T* x = g.data<T>();
  bool bad = false;
  const T s = static_cast<T>(inv);
  for (std::int64_t i = 0, n = g.numel(); i < n; ++i) {
    bad |= !std::isfinite(x[i]);
    x[i] *= s;
  }
  return bad;
}

// The same on a device, in device ops: the count of inf/NaN elements accumulates on the
// device and is read once by the caller (bad_count.item()).
void unscale_on_device(const Tensor& g, float inv, Tensor& bad_count) {
  const Tensor inf = tensor::full({}, INFINITY, g.dtype(), g.device());
  const Tensor nonfinite =
      tensor::add(tensor::sum(tensor::ne(g, g)), tensor::sum(tensor::eq(tensor::abs(g), inf)));
  bad_count = bad_count.defined() ? tensor::add(bad_count, nonfinite) : nonfinite;
  Tensor target = g;
  tensor::mul_(target, static_cast<double>(inv));
}

void check_scale(double scale, const char* what) {
  RINGLET_CHECK(std::isfinite(scale) && scale > 0, ValueError, "GradScaler: ", what,
                " must be positive and finite, got ", scale);
}

}  // namespace

GradScaler::GradScaler(GradScalerOptions options)
    : enabled_(options.enabled),
      scale_(options.init_scale),
      growth_factor_(options.growth_factor),
      backoff_factor_(options.backoff_factor),
      growth_interval_(options.growth_interval) {
  check_scale(scale_, "init_scale");
  RINGLET_CHECK(growth_factor_ > 1.0 && std::isfinite(growth_factor_), ValueError,
                "GradScaler: growth_factor must be a finite number > 1, got ", growth_factor_);
  RINGLET_CHECK(backoff_factor_ > 0.0 && backoff_factor_ < 1.0, ValueError,
                "GradScaler: backoff_factor must be in (0, 1), got ", backoff_factor_);
  RINGLET_CHECK(growth_interval_ > 0, ValueError,
                "GradScaler: growth_interval must be positive, got ", growth_interval_);
}

Tensor GradScaler::scale(const Tensor& loss) const {
  if (!enabled_) return loss;
  return tensor::mul(loss, scale_);
}

void GradScaler::unscale_(Optimizer& optimizer) {
  if (!enabled_) return;
  RINGLET_CHECK(unscaled_.count(&optimizer) == 0, ValueError, "GradScaler: unscale_() has already ",
                "been called on this ", optimizer.name(), " optimizer since the last update()");
  const float inv = static_cast<float>(1.0 / scale_);
  bool bad = false;
  Tensor device_bad;  // the inf/NaN count of device gradients, read once below
  tensor::NoGradGuard no_grad;
  for (const Tensor& p : optimizer.parameters()) {
    const Tensor& g = p.grad();
    if (!g.defined()) continue;
    RINGLET_CHECK(g.is_contiguous(), ValueError, "GradScaler: gradients must be contiguous");
    RINGLET_CHECK(g.dtype() == core::DType::f32 || g.dtype() == core::DType::f64, DTypeError,
                  "GradScaler: gradients must be f32 or f64 (master weights), got ", g.dtype());
    if (!g.device().is_cpu()) {
      unscale_on_device(g, inv, device_bad);
    } else if (g.dtype() == core::DType::f32) {
      bad |= unscale_in_place<float>(g, inv);
    } else if (g.dtype() == core::DType::f64) {
      bad |= unscale_in_place<double>(g, inv);
    } else {
      RINGLET_THROW(DTypeError, "GradScaler: gradients must be f32 or f64 (master weights), got ",
                    g.dtype());
    }
  }
  if (device_bad.defined()) bad |= device_bad.item() > 0;
  unscaled_[&optimizer] = bad;
}

bool GradScaler::step(Optimizer& optimizer) {
  if (!enabled_) {
    optimizer.step();
    return true;
  }
  if (unscaled_.count(&optimizer) == 0) unscale_(optimizer);
  if (unscaled_.at(&optimizer)) return false;
  optimizer.step();
  return true;
}

void GradScaler::update() {
  if (!enabled_) return;
  bool overflow = false;
  for (const auto& [opt, bad] : unscaled_) overflow |= bad;
  unscaled_.clear();
  if (overflow) {
    scale_ *= backoff_factor_;
    growth_tracker_ = 0;
    return;
  }
  if (++growth_tracker_ == growth_interval_) {
    const double grown = scale_ * growth_factor_;
    if (std::isfinite(grown)) scale_ = grown;
    growth_tracker_ = 0;
  }
}

void GradScaler::update(double new_scale) {
  if (!enabled_) return;
  check_scale(new_scale, "the new scale");
  unscaled_.clear();
  scale_ = new_scale;
}

bool GradScaler::found_inf(const Optimizer& optimizer) const {
  const auto it = unscaled_.find(&optimizer);
  return it != unscaled_.end() && it->second;
}

NamedState GradScaler::state_dict() const {
  NamedState s;
  if (!enabled_) return s;  // as PyTorch: a disabled scaler has no state
  s.set("scale", scale_);
  s.set("growth_factor", growth_factor_);
  s.set("backoff_factor", backoff_factor_);
  s.set("growth_interval", static_cast<double>(growth_interval_));
  s.set("_growth_tracker", static_cast<double>(growth_tracker_));
  return s;
}

void GradScaler::load_state_dict(const NamedState& state) {
  RINGLET_CHECK(enabled_, ValueError, "GradScaler: load_state_dict on a disabled scaler");
  RINGLET_CHECK(!state.empty(), ValueError,
                "GradScaler: the state is empty (saved from a disabled scaler)");
  const double scale = state.scalar("scale");
  const double growth = state.scalar("growth_factor");
  const double backoff = state.scalar("backoff_factor");
  const double interval = state.scalar("growth_interval");
  const double tracker = state.scalar("_growth_tracker");
  check_scale(scale, "scale");
  RINGLET_CHECK(growth > 1.0 && std::isfinite(growth) && backoff > 0.0 && backoff < 1.0 &&
                    interval >= 1 && interval == std::floor(interval) && tracker >= 0 &&
                    tracker < interval && tracker == std::floor(tracker),
                ValueError, "GradScaler: state out of range (growth_factor ", growth,
                ", backoff_factor ", backoff, ", growth_interval ", interval, ", _growth_tracker ",
                tracker, ")");
  scale_ = scale;
  growth_factor_ = growth;
  backoff_factor_ = backoff;
  growth_interval_ = static_cast<std::int64_t>(interval);
  growth_tracker_ = static_cast<std::int64_t>(tracker);
}

}  // namespace ringlet::nn
