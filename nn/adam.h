// Adam and AdamW: torch.optim.Adam / AdamW's update rules, operation for operation (PyTorch
// 1.13's single-tensor path, bias corrections computed in double as Python does):
//   t += 1;  Adam: g = grad + weight_decay * p;  AdamW: p = p * (1 - lr * weight_decay)
//   m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g * g
//   vmax = max(vmax, v) (amsgrad);  denom = sqrt(v or vmax) / sqrt(1 - beta2^t) + eps
//   p = p - (lr / (1 - beta1^t)) * m / denom
// State per parameter: exp_avg, exp_avg_sq, [max_exp_avg_sq] and step.
#pragma once

#include "nn/optimizer.h"

namespace ringlet::nn {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;  // Adam: L2 added to the gradient; AdamW: decoupled decay
  bool amsgrad = false;
};

// AdamW's defaults differ from Adam's only in the weight decay (PyTorch's 1e-2).
struct AdamWOptions : AdamOptions {
  AdamWOptions() { weight_decay = 1e-2; }
};

class Adam : public Optimizer {
 public:
  // Throws ValueError on lr < 0, eps < 0, a beta outside [0, 1) or weight_decay < 0.
  Adam(std::vector<tensor::Tensor> params, AdamOptions options = {});

  void step() override;
  const AdamOptions& options() const { return options_; }
  std::string prepare_capture(core::Device) override {
    return name() +
           "'s bias corrections follow the host's step count: its step cannot be "
           "captured into a graph (use sgd)";
  }

 protected:
  Adam(std::string name, std::vector<tensor::Tensor> params, AdamOptions options, bool decoupled);
  std::vector<std::string> buffer_names() const override;
  bool has_step() const override { return true; }
  void validate() const override;

 private:
  AdamOptions options_;  // options_.lr is only the initial value; Optimizer::lr() is current
  bool decoupled_;       // AdamW
};

class AdamW : public Adam {
 public:
  AdamW(std::vector<tensor::Tensor> params, AdamWOptions options = {});
};

}  // namespace ringlet::nn
