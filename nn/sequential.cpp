// Sequential: a chain of children; the index is the child's registered name.
#include "nn/sequential.h"

#include <string>

namespace ringlet::nn {

Sequential::Sequential(std::vector<std::shared_ptr<Module>> modules) {
  for (auto& m : modules) add(std::move(m));
}

Sequential& Sequential::add(std::shared_ptr<Module> module) {
  add_child(std::to_string(children().size()), std::move(module));
  return *this;
}

Tensor Sequential::forward(const Tensor& input) {
  Tensor x = input;
  for (const auto& [name, child] : children()) x = child->forward(x);
  return x;
}

const std::shared_ptr<Module>& Sequential::operator[](std::size_t i) const {
  RINGLET_CHECK(i < size(), ValueError, "Sequential: index ", i, " out of range (size ", size(),
                ")");
  return children()[i].second;
}

}  // namespace ringlet::nn
