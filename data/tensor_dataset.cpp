#include "data/tensor_dataset.h"

#include <cstring>

#include "core/error.h"

namespace ringlet::data {
namespace {

tensor::Tensor on_host(const tensor::Tensor& t, const char* what) {
  RINGLET_CHECK(t.defined(), ValueError, "TensorDataset: no ", what, " tensor");
  RINGLET_CHECK(t.dim() >= 1, ValueError, "TensorDataset: ", what,
                " must have a dimension to index (rows), got a scalar");
  return t.detach().to(core::Device::cpu()).contiguous();
}

// Row `index` of `t` (contiguous, host) as a tensor of its own.
tensor::Tensor row(const tensor::Tensor& t, std::int64_t index) {
  const tensor::Shape shape(t.shape().begin() + 1, t.shape().end());
  tensor::Tensor out = tensor::Tensor::empty(shape, t.dtype());
  const std::size_t bytes = out.nbytes();
  std::memcpy(out.raw_data(), static_cast<const char*>(t.raw_data()) + index * bytes, bytes);
  return out;
}

}  // namespace

TensorDataset::TensorDataset(const tensor::Tensor& inputs, const tensor::Tensor& targets)
    : inputs_(on_host(inputs, "inputs")), targets_(on_host(targets, "targets")) {
  RINGLET_CHECK(inputs_.size(0) == targets_.size(0), ValueError, "TensorDataset: inputs ",
                tensor::shape_str(inputs_.shape()), " and targets ",
                tensor::shape_str(targets_.shape()), " differ in their first dimension (rows)");
  rows_ = inputs_.size(0);
}

Example TensorDataset::get(std::int64_t index) const {
  RINGLET_CHECK(index >= 0 && index < rows_, ValueError, "TensorDataset: index ", index,
                " out of range [0, ", rows_, ")");
  Example example;
  example.image = row(inputs_, index);
  example.target = row(targets_, index);
  return example;
}

}  // namespace ringlet::data
