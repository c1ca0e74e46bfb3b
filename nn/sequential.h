// Sequential as torch.nn.Sequential: children named "0", "1", ... in order, each fed the
// previous one's output. Those names are the state-dict prefixes PyTorch uses ("3.weight").
// Fusions (those classes exactly; the same values and gradients): on the host a ReLU followed by
// a MaxPool2d runs as one op, the pool taking the maximum of relu(x) without relu's output (the
// CNNs' pattern); on a device a Linear, Conv2d or BatchNorm2d followed by a ReLU applies it in
// its own kernel.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "nn/module.h"

namespace ringlet::nn {

class Sequential : public Module {
 public:
  Sequential() = default;
  explicit Sequential(std::vector<std::shared_ptr<Module>> modules);

  // Appends `module` under the next index; returns *this for chaining.
  Sequential& add(std::shared_ptr<Module> module);

  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Sequential"; }

  std::size_t size() const { return children().size(); }
  // Throws ValueError out of range.
  const std::shared_ptr<Module>& operator[](std::size_t i) const;
};

// Sequential from a list of modules: seq(std::make_shared<Conv2d>(...), ...). The arguments
// are constructed in an unspecified order: when several draw from one Generator, add() them in
// separate statements instead, so the draws follow the layer order.
template <class... Ms>
std::shared_ptr<Sequential> seq(std::shared_ptr<Ms>... modules) {
  return std::make_shared<Sequential>(
      std::vector<std::shared_ptr<Module>>{std::static_pointer_cast<Module>(modules)...});
}

}  // namespace ringlet::nn
