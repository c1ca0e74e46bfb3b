// GradScaler: dynamic loss scaling for mixed-precision training, as torch.cuda.amp.GradScaler.
// Half-precision gradients underflow to zero when the loss is small; multiplying the loss by a
// large scale before backward keeps them representable, and dividing the gradients by it again
// before the update restores their values. When a scaled gradient overflows (inf/NaN) the step
// is skipped and the scale shrinks; after growth_interval good steps in a row it grows.
//
//   auto loss = criterion(model(x), y);
//   scaler.scale(loss).backward();
//   scaler.step(opt);     // unscales (unless unscale_ was called), skips the step on inf/NaN
//   scaler.update();      // backoff on overflow, growth after growth_interval good steps
//
// Under DDP the gradients are averaged before step(), so an overflow on any rank reaches every
// rank and all of them skip the same step. Gradients are host tensors (f32/f64), as for the
// optimizers.
#pragma once

#include <cstdint>
#include <map>

#include "nn/optimizer.h"
#include "tensor/tensor.h"

namespace ringlet::nn {

struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;   // > 1
  double backoff_factor = 0.5;  // in (0, 1)
  std::int64_t growth_interval = 2000;
  bool enabled = true;  // disabled: scale() and unscale_ are identities, step() always steps
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  // loss * scale (tracked by autograd); the loss itself when disabled.
  tensor::Tensor scale(const tensor::Tensor& loss) const;

  // Divides the gradients of `optimizer`'s parameters by the scale in place, and records
  // whether any was inf or NaN. At most once per optimizer between update()s (ValueError
  // otherwise); call it before clipping gradients so the clip sees their true values.
  void unscale_(Optimizer& optimizer);

  // Unscales if unscale_ was not called, then runs optimizer.step() unless a gradient was
  // inf or NaN. Returns whether the step ran.
  bool step(Optimizer& optimizer);

  // Adjusts the scale after the step(s) of one iteration: times backoff_factor if any
  // optimizer saw inf/NaN, times growth_factor after growth_interval clean iterations in a row
  // (when the grown scale is finite). Forgets what unscale_ recorded.
  void update();
  // Sets the scale (> 0, finite) instead, as update(new_scale).
  void update(double new_scale);

  double get_scale() const { return enabled_ ? scale_ : 1.0; }
  std::int64_t growth_tracker() const { return growth_tracker_; }
  bool is_enabled() const { return enabled_; }
  // Whether the last unscale_ of `optimizer` since update() found inf or NaN.
  bool found_inf(const Optimizer& optimizer) const;

  // PyTorch's keys: scale, growth_factor, backoff_factor, growth_interval, _growth_tracker.
  NamedState state_dict() const;
  void load_state_dict(const NamedState& state);

 private:
  bool enabled_;
  double scale_;
  double growth_factor_, backoff_factor_;
  std::int64_t growth_interval_;
  std::int64_t growth_tracker_ = 0;
  std::map<const Optimizer*, bool> unscaled_;  // optimizer -> found inf/NaN, this iteration
};

}  // namespace ringlet::nn
