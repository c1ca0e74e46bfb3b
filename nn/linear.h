// Linear: y = x W^T + b over the last dim, as torch.nn.Linear (weight [out, in], bias [out]).
#pragma once

#include <cstdint>

#include "nn/module.h"
#include "tensor/activation.h"
#include "tensor/generator.h"

namespace ringlet::nn {

class Linear : public Module {
 public:
  // PyTorch's default init, drawn from `gen` (weight first, then bias).
  Linear(std::int64_t in_features, std::int64_t out_features, tensor::Generator& gen,
         bool bias = true);

  Tensor forward(const Tensor& input) override;
  // ... then `act`: relu(forward(input)), the bias and the ReLU one kernel on a device.
  Tensor forward(const Tensor& input, tensor::Activation act);
  std::string type_name() const override { return "Linear"; }
  std::string extra_repr() const override;

  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }  // undefined without bias
  std::int64_t in_features() const { return in_features_; }
  std::int64_t out_features() const { return out_features_; }

 private:
  std::int64_t in_features_, out_features_;
  Tensor weight_, bias_;
};

}  // namespace ringlet::nn
