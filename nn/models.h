// Ready-made models, built from an explicit Generator (PyTorch's default init for every
// layer). Parameter counts (checked against PyTorch in tests/golden/nn.json):
//   fmnist_cnn   421,834     the FMNIST CNN of bench/peers/src/train_fmnist.py, one
//                            Sequential, so its state-dict keys are PyTorch's ("0.weight",
//                            "1.running_mean", ..., "11.bias")
//   resnet18     11,173,962  CIFAR variant: 3x3 stride-1 stem, no max-pool, BasicBlocks
//                            [2, 2, 2, 2] of 64-128-256-512 channels, 10 classes
//   resnet20     272,474     He et al.'s CIFAR ResNet-20: 16-32-64 channels, 3 BasicBlocks per
//                            stage, with option-B (1x1 conv + BN) projection shortcuts where
//                            the shape changes; the paper's option A (zero-padding identity,
//                            no parameters) would give 269,722
// ResNet keys follow torchvision (conv1, bn1, layer1.0.conv1, ..., downsample, fc).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/batch_norm.h"
#include "nn/conv2d.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/pooling.h"
#include "nn/sequential.h"
#include "tensor/generator.h"

namespace ringlet::nn {

// conv1 (3x3, stride 1, no bias) -> bn1 -> relu -> layer1..layerK (Sequentials of
// BasicBlocks; layer1 stride 1, the others stride 2) -> global average pool -> fc.
class ResNet : public Module {
 public:
  ResNet(const std::vector<std::int64_t>& widths, const std::vector<int>& blocks,
         std::int64_t num_classes, std::int64_t in_channels, tensor::Generator& gen);

  Tensor forward(const Tensor& input) override;  // [N, in_channels, H, W] -> [N, classes]
  std::string type_name() const override { return "ResNet"; }

 private:
  std::shared_ptr<Conv2d> conv1_;
  std::shared_ptr<BatchNorm2d> bn1_;
  std::vector<std::shared_ptr<Sequential>> layers_;
  std::shared_ptr<AdaptiveAvgPool2d> avgpool_;
  std::shared_ptr<Linear> fc_;
};

std::shared_ptr<Sequential> fmnist_cnn(tensor::Generator& gen);
std::shared_ptr<ResNet> resnet18(tensor::Generator& gen, std::int64_t num_classes = 10,
                                 std::int64_t in_channels = 3);
std::shared_ptr<ResNet> resnet20(tensor::Generator& gen, std::int64_t num_classes = 10,
                                 std::int64_t in_channels = 3);

// The model names above, for configs and the CLI.
const std::vector<std::string>& model_names();
// By name; an unknown name is a ValueError that lists the valid ones. fmnist_cnn accepts only
// num_classes 10 and in_channels 1 (its Linear(3136, 128) fixes 28x28 inputs).
std::shared_ptr<Module> make_model(const std::string& name, tensor::Generator& gen,
                                   std::int64_t num_classes = 10, std::int64_t in_channels = 3);

}  // namespace ringlet::nn
