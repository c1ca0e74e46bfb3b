// BasicBlock of ResNet (He et al. 2016), with torchvision's member names:
//   out = relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x))
// conv1 is 3x3 with the block's stride, conv2 3x3 stride 1, both without bias. The shortcut
// is the identity when shapes agree, else a 1x1 projection (conv stride s, no bias, then BN)
// registered as "downsample" ("downsample.0.weight", "downsample.1.running_mean"): PyTorch's
// option B, which torchvision uses.
#pragma once

#include <cstdint>
#include <memory>

#include "nn/batch_norm.h"
#include "nn/conv2d.h"
#include "nn/module.h"
#include "nn/sequential.h"
#include "tensor/generator.h"

namespace ringlet::nn {

class BasicBlock : public Module {
 public:
  static constexpr std::int64_t kExpansion = 1;

  // A projection shortcut is added iff stride != 1 or in_channels != out_channels.
  BasicBlock(std::int64_t in_channels, std::int64_t out_channels, std::int64_t stride,
             tensor::Generator& gen);

  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "BasicBlock"; }
  std::string extra_repr() const override;

  bool has_projection() const { return downsample_ != nullptr; }

 private:
  std::int64_t in_channels_, out_channels_, stride_;
  std::shared_ptr<Conv2d> conv1_, conv2_;
  std::shared_ptr<BatchNorm2d> bn1_, bn2_;
  std::shared_ptr<Sequential> downsample_;  // null for the identity shortcut
};

}  // namespace ringlet::nn
