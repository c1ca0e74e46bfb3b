// Dropout as torch.nn.Dropout (inverted: survivors scaled by 1/(1-p) in training, identity in
// eval). Each Dropout owns its Generator, so masks are reproducible from the seed and do not
// disturb any other random stream; generator() exposes it for checkpointing its state.
#pragma once

#include <cstdint>

#include "nn/module.h"
#include "tensor/generator.h"

namespace ringlet::nn {

class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5, std::uint64_t seed = 0);

  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Dropout"; }
  std::string extra_repr() const override;

  double p() const { return p_; }
  tensor::Generator& generator() { return gen_; }

 private:
  double p_;
  tensor::Generator gen_;
};

}  // namespace ringlet::nn
