// Dropout over tensor::dropout with the module's own Generator.
#include "nn/dropout.h"

#include <sstream>

#include "tensor/ops/dropout.h"

namespace ringlet::nn {

Dropout::Dropout(double p, std::uint64_t seed) : p_(p), gen_(seed) {
  RINGLET_CHECK(p >= 0.0 && p <= 1.0, ValueError, "Dropout: p must be in [0, 1], got ", p);
}

Tensor Dropout::forward(const Tensor& input) {
  return tensor::dropout(input, p_, is_training(), gen_);
}

std::string Dropout::extra_repr() const {
  std::ostringstream s;
  s << "p=" << p_;
  return s.str();
}

}  // namespace ringlet::nn
