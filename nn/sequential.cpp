// Sequential: a chain of children; the index is the child's registered name.
#include "nn/sequential.h"

#include <string>
#include <typeinfo>

#include "nn/activation.h"
#include "nn/batch_norm.h"
#include "nn/conv2d.h"
#include "nn/linear.h"
#include "nn/pooling.h"

namespace ringlet::nn {

Sequential::Sequential(std::vector<std::shared_ptr<Module>> modules) {
  for (auto& m : modules) add(std::move(m));
}

Sequential& Sequential::add(std::shared_ptr<Module> module) {
  add_child(std::to_string(children().size()), std::move(module));
  return *this;
}

namespace {

// A ReLU, then a MaxPool2d: both exactly those classes, not a subclass that may forward otherwise.
bool relu_then_max_pool(const Module& first, const Module& second) {
  return typeid(first) == typeid(ReLU) && typeid(second) == typeid(MaxPool2d);
}

// A layer whose op can apply the ReLU that follows it in its own kernel on a device (exactly
// these classes), run so: `x` through `layer`, then the ReLU.
bool forward_with_relu(Module& layer, const Module& next, Tensor& x) {
  if (typeid(next) != typeid(ReLU)) return false;
  const auto relu = tensor::Activation::relu;
  if (typeid(layer) == typeid(Linear)) {
    x = static_cast<Linear&>(layer).forward(x, relu);
  } else if (typeid(layer) == typeid(Conv2d)) {
    x = static_cast<Conv2d&>(layer).forward(x, relu);
  } else if (typeid(layer) == typeid(BatchNorm2d)) {
    x = static_cast<BatchNorm2d&>(layer).forward(x, relu);
  } else {
    return false;
  }
  return true;
}

}  // namespace

// On the host a ReLU goes with the MaxPool2d after it (tensor::relu_max_pool2d: the CPU's fused
// pool); on a device with the layer before it (the epilogue of its kernel).
Tensor Sequential::forward(const Tensor& input) {
  Tensor x = input;
  const auto& kids = children();
  for (std::size_t i = 0; i < kids.size(); ++i) {
    if (i + 1 < kids.size() && !x.device().is_cpu() &&
        forward_with_relu(*kids[i].second, *kids[i + 1].second, x)) {
      ++i;
      continue;
    }
    if (i + 1 < kids.size() && relu_then_max_pool(*kids[i].second, *kids[i + 1].second)) {
      x = static_cast<MaxPool2d&>(*kids[i + 1].second).forward_after_relu(x);
      ++i;
      continue;
    }
    x = kids[i].second->forward(x);
  }
  return x;
}

const std::shared_ptr<Module>& Sequential::operator[](std::size_t i) const {
  RINGLET_CHECK(i < size(), ValueError, "Sequential: index ", i, " out of range (size ", size(),
                ")");
  return children()[i].second;
}

}  // namespace ringlet::nn
