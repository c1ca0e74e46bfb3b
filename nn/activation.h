// Activation modules. ReLU has no parameters; its gradient at 0 is 0, as PyTorch's.
#pragma once

#include "nn/module.h"

namespace ringlet::nn {

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "ReLU"; }
};

}  // namespace ringlet::nn
