// Tensor metadata, element access and the methods that forward to ops.
#include "tensor/tensor.h"

#include <sstream>

#include "tensor/cpu/dispatch.h"
#include "tensor/device/transfer.h"
#include "tensor/ops/movement.h"

namespace ringlet::tensor {

std::string shape_str(const Shape& shape) {
  std::ostringstream out;
  out << '[';
  for (std::size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << ']';
  return out.str();
}

std::int64_t shape_numel(const Shape& shape) {
  std::int64_t n = 1;
  for (auto extent : shape) n *= extent;
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  std::int64_t running = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = running;
    running *= std::max<std::int64_t>(shape[i], 1);
  }
  return strides;
}

std::int64_t wrap_dim(std::int64_t dim, std::int64_t ndim, const char* op) {
  const std::int64_t lo = ndim == 0 ? -1 : -ndim;
  const std::int64_t hi = ndim == 0 ? 0 : ndim - 1;
  RINGLET_CHECK(dim >= lo && dim <= hi, ValueError, op, ": dim ", dim,
                " is out of range for a tensor of rank ", ndim, " (expected [", lo, ", ", hi, "])");
  return dim < 0 ? dim + std::max<std::int64_t>(ndim, 1) : dim;
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (auto extent : shape) {
    RINGLET_CHECK(extent >= 0, ShapeError, "empty: negative size in shape ", shape_str(shape));
  }
  auto impl = std::make_shared<TensorImpl>();
  const std::size_t bytes = static_cast<std::size_t>(shape_numel(shape)) * core::dtype_size(dtype);
  impl->storage = std::make_shared<Storage>(bytes, allocator_for(device));
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::make_view(std::shared_ptr<Storage> storage, Shape shape, Shape strides,
                         std::int64_t offset, DType dtype) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

std::int64_t Tensor::size(std::int64_t d) const { return shape()[wrap_dim(d, dim(), "size")]; }
std::int64_t Tensor::stride(std::int64_t d) const {
  return strides()[wrap_dim(d, dim(), "stride")];
}

bool Tensor::is_contiguous() const {
  std::int64_t expected = 1;
  for (std::size_t i = shape().size(); i-- > 0;) {
    if (shape()[i] == 1) continue;  // any stride is fine for a size-1 dim
    if (strides()[i] != expected) return false;
    expected *= shape()[i];
  }
  return true;
}

void* Tensor::raw_data() const {
  auto* base = static_cast<char*>(storage()->data());
  return base == nullptr ? nullptr
                         : base + offset() * static_cast<std::int64_t>(core::dtype_size(dtype()));
}

double Tensor::item() const {
  RINGLET_CHECK(numel() == 1, ShapeError, "item() needs a one-element tensor, got shape ",
                shape_str(shape()));
  return to_vector<double>()[0];
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  const Tensor host = device().is_cpu() ? contiguous() : cpu();
  std::vector<T> values(static_cast<std::size_t>(host.numel()));
  cpu::dispatch_all(host.dtype(), [&]<class S>() {
    const S* in = static_cast<const S*>(host.raw_data());
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = cpu::convert<T>(in[i]);
  });
  return values;
}
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<std::int64_t> Tensor::to_vector<std::int64_t>() const;
template std::vector<std::int32_t> Tensor::to_vector<std::int32_t>() const;
template std::vector<std::uint8_t> Tensor::to_vector<std::uint8_t>() const;

Tensor Tensor::contiguous() const { return tensor::contiguous(*this); }
Tensor Tensor::clone() const { return tensor::clone(*this); }
Tensor Tensor::reshape(const Shape& s) const { return tensor::reshape(*this, s); }
Tensor Tensor::view(const Shape& s) const { return tensor::view(*this, s); }
Tensor Tensor::transpose(std::int64_t a, std::int64_t b) const {
  return tensor::transpose(*this, a, b);
}
Tensor Tensor::permute(const Shape& dims) const { return tensor::permute(*this, dims); }

Tensor Tensor::to(Device target, bool non_blocking) const {
  return tensor::transfer(*this, target, non_blocking);
}

Tensor Tensor::pin_memory() const { return tensor::pin_memory(*this); }

}  // namespace ringlet::tensor
