// The model zoo. fmnist_cnn mirrors make_model() of train_fmnist.py layer for layer; the
// ResNets mirror torchvision's ResNet with the CIFAR stem (no 7x7 conv, no max-pool).
#include "nn/models.h"

#include "nn/activation.h"
#include "nn/flatten.h"
#include "nn/residual.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/movement.h"

namespace ringlet::nn {

ResNet::ResNet(const std::vector<std::int64_t>& widths, const std::vector<int>& blocks,
               std::int64_t num_classes, std::int64_t in_channels, tensor::Generator& gen) {
  RINGLET_CHECK(!widths.empty() && widths.size() == blocks.size(), ValueError,
                "ResNet: need one width per stage, got ", widths.size(), " widths and ",
                blocks.size(), " block counts");
  conv1_ = register_module(
      "conv1", std::make_shared<Conv2d>(in_channels, widths[0], 3, gen,
                                        Conv2dOptions{.stride = 1, .padding = 1, .bias = false}));
  bn1_ = register_module("bn1", std::make_shared<BatchNorm2d>(widths[0]));
  std::int64_t channels = widths[0];
  for (std::size_t stage = 0; stage < widths.size(); ++stage) {
    auto layer = std::make_shared<Sequential>();
    for (int b = 0; b < blocks[stage]; ++b) {
      const std::int64_t stride = (stage > 0 && b == 0) ? 2 : 1;
      layer->add(std::make_shared<BasicBlock>(channels, widths[stage], stride, gen));
      channels = widths[stage];
    }
    layers_.push_back(register_module("layer" + std::to_string(stage + 1), layer));
  }
  avgpool_ = register_module("avgpool", std::make_shared<AdaptiveAvgPool2d>(1));
  fc_ = register_module("fc", std::make_shared<Linear>(channels, num_classes, gen));
}

Tensor ResNet::forward(const Tensor& input) {
  Tensor x = bn1_->forward(conv1_->forward(input), tensor::Activation::relu);
  for (const auto& layer : layers_) x = layer->forward(x);
  return fc_->forward(tensor::flatten(avgpool_->forward(x), 1));
}

std::shared_ptr<Sequential> fmnist_cnn(tensor::Generator& gen) {
  // One statement per layer, so the layers draw from gen in PyTorch's order (the arguments of
  // one seq(...) call would be evaluated in an unspecified order).
  const Conv2dOptions same{.padding = 1};
  auto model = std::make_shared<Sequential>();
  model->add(std::make_shared<Conv2d>(1, 32, 3, gen, same));
  model->add(std::make_shared<BatchNorm2d>(32));
  model->add(std::make_shared<ReLU>());
  model->add(std::make_shared<MaxPool2d>(2));
  model->add(std::make_shared<Conv2d>(32, 64, 3, gen, same));
  model->add(std::make_shared<BatchNorm2d>(64));
  model->add(std::make_shared<ReLU>());
  model->add(std::make_shared<MaxPool2d>(2));
  model->add(std::make_shared<Flatten>());
  model->add(std::make_shared<Linear>(3136, 128, gen));
  model->add(std::make_shared<ReLU>());
  model->add(std::make_shared<Linear>(128, 10, gen));
  return model;
}

std::shared_ptr<ResNet> resnet18(tensor::Generator& gen, std::int64_t num_classes,
                                 std::int64_t in_channels) {
  return std::make_shared<ResNet>(std::vector<std::int64_t>{64, 128, 256, 512},
                                  std::vector<int>{2, 2, 2, 2}, num_classes, in_channels, gen);
}

std::shared_ptr<ResNet> resnet20(tensor::Generator& gen, std::int64_t num_classes,
                                 std::int64_t in_channels) {
  return std::make_shared<ResNet>(std::vector<std::int64_t>{16, 32, 64}, std::vector<int>{3, 3, 3},
                                  num_classes, in_channels, gen);
}

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names = {"fmnist_cnn", "resnet18", "resnet20"};
  return names;
}

std::shared_ptr<Module> make_model(const std::string& name, tensor::Generator& gen,
                                   std::int64_t num_classes, std::int64_t in_channels) {
  if (name == "fmnist_cnn") {
    RINGLET_CHECK(num_classes == 10 && in_channels == 1, ValueError,
                  "fmnist_cnn is fixed to 1 input channel and 10 classes, got in_channels=",
                  in_channels, " num_classes=", num_classes);
    return fmnist_cnn(gen);
  }
  if (name == "resnet18") return resnet18(gen, num_classes, in_channels);
  if (name == "resnet20") return resnet20(gen, num_classes, in_channels);
  RINGLET_THROW(ValueError, "unknown model '", name, "' (valid: fmnist_cnn, resnet18, resnet20)");
}

}  // namespace ringlet::nn
