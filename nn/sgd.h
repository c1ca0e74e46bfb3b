// SGD with momentum, dampening, Nesterov momentum and L2 weight decay: torch.optim.SGD's
// update rule, operation for operation (PyTorch 1.13's single-tensor path), so results equal
// PyTorch's bitwise on its golden cases:
//   g = grad + weight_decay * p
//   buf = g on the first step (no dampening), else buf = momentum * buf + (1 - dampening) * g
//   g = nesterov ? g + momentum * buf : buf          (when momentum != 0)
//   p = p - lr * g
#pragma once

#include "nn/optimizer.h"

namespace ringlet::nn {

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;  // needs momentum > 0 and dampening == 0 (as PyTorch)
};

class SGD : public Optimizer {
 public:
  // Throws ValueError on a negative lr, momentum or weight decay, or an invalid Nesterov setup.
  SGD(std::vector<tensor::Tensor> params, SGDOptions options);

  void step() override;
  const SGDOptions& options() const { return options_; }
  // Captured steps read the learning rate from a device scalar that stage_step() fills.
  std::string prepare_capture(core::Device device) override;
  void stage_step() override;

 protected:
  std::vector<std::string> buffer_names() const override;
  bool has_step() const override { return false; }
  void validate() const override;

 private:
  SGDOptions options_;  // options_.lr is only the initial value; Optimizer::lr() is current
  tensor::Tensor lr_on_device_;  // f64 [], once prepare_capture() ran
};

}  // namespace ringlet::nn
