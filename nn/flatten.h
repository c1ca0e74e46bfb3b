// Flatten as torch.nn.Flatten: merges dims start_dim..end_dim (default: all but the batch).
#pragma once

#include <cstdint>

#include "nn/module.h"

namespace ringlet::nn {

class Flatten : public Module {
 public:
  explicit Flatten(std::int64_t start_dim = 1, std::int64_t end_dim = -1)
      : start_dim_(start_dim), end_dim_(end_dim) {}

  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Flatten"; }
  std::string extra_repr() const override;

 private:
  std::int64_t start_dim_, end_dim_;
};

}  // namespace ringlet::nn
