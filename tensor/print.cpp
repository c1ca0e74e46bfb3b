// Tensor printing in PyTorch's spirit: nested brackets, at most kEdge items at each end of a
// dim once the tensor is larger than kSummarizeAbove elements, then shape/dtype/device.
#include <iomanip>
#include <sstream>

#include "tensor/autograd.h"
#include "tensor/tensor.h"

namespace ringlet::tensor {
namespace {

constexpr std::int64_t kSummarizeAbove = 1000;
constexpr std::int64_t kEdge = 3;

void print_dim(std::ostringstream& out, const std::vector<double>& values, const Shape& shape,
               const Shape& strides, std::size_t d, std::int64_t base, bool summarize,
               bool floating, int indent) {
  if (d == shape.size()) {
    const double v = values[static_cast<std::size_t>(base)];
    if (floating) {
      out << std::setprecision(4) << v;
    } else {
      out << static_cast<std::int64_t>(v);
    }
    return;
  }
  out << '[';
  const std::int64_t n = shape[d];
  for (std::int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdge && i == kEdge) {
      out << (d + 1 == shape.size() ? "..., " : "...,\n" + std::string(indent + 1, ' '));
      i = n - kEdge;
    }
    print_dim(out, values, shape, strides, d + 1, base + i * strides[d], summarize, floating,
              indent + 1);
    if (i + 1 < n) out << (d + 1 == shape.size() ? ", " : ",\n" + std::string(indent + 1, ' '));
  }
  out << ']';
}

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  std::ostringstream out;
  out << "tensor(";
  const std::vector<double> values = to_vector<double>();
  print_dim(out, values, shape(), contiguous_strides(shape()), 0, 0, numel() > kSummarizeAbove,
            core::is_floating(dtype()), 7);
  out << ", shape=" << shape_str(shape()) << ", dtype=" << dtype();
  if (!device().is_cpu()) out << ", device=" << device();
  if (requires_grad()) out << (grad_fn() ? ", grad_fn=" + grad_fn()->name() : ", requires_grad");
  out << ')';
  return out.str();
}

}  // namespace ringlet::tensor
