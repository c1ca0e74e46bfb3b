// Tensor: a handle (shared_ptr) to metadata over shared Storage: shape, strides and offset
// in elements, dtype. Views share storage and only rewrite shape/strides/offset.
// Copying a Tensor copies the handle, not the data (as in PyTorch).
// Autograd state (requires_grad, grad, grad_fn, hooks) lives in the same impl; the engine is
// in tensor/autograd.h. Ops are free functions declared in tensor/ops/*.h; the methods here
// are the few that read better as methods.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "tensor/storage.h"

namespace ringlet::tensor {

using core::DType;
using Shape = std::vector<std::int64_t>;

class Node;
class Tensor;
using GradHook = std::function<void(const Tensor& grad)>;

std::string shape_str(const Shape& shape);  // "[2, 3]"
std::int64_t shape_numel(const Shape& shape);
Shape contiguous_strides(const Shape& shape);

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;            // in elements
  std::int64_t offset = 0;  // in elements
  DType dtype = DType::f32;
  // autograd
  bool requires_grad = false;
  std::shared_ptr<Node> grad_fn;  // null for leaves
  std::shared_ptr<TensorImpl> grad;
  std::vector<GradHook> hooks;  // run when this leaf's gradient is final for one backward
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // Uninitialized contiguous tensor.
  static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
  // A view over existing storage.
  static Tensor make_view(std::shared_ptr<Storage> storage, Shape shape, Shape strides,
                          std::int64_t offset, DType dtype);

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  const Shape& strides() const { return impl().strides; }
  std::int64_t offset() const { return impl().offset; }
  std::int64_t dim() const { return static_cast<std::int64_t>(impl().shape.size()); }
  std::int64_t size(std::int64_t d) const;  // negative d counts from the end
  std::int64_t stride(std::int64_t d) const;
  std::int64_t numel() const { return shape_numel(impl().shape); }
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().storage->device(); }
  const std::shared_ptr<Storage>& storage() const { return impl().storage; }
  bool is_contiguous() const;
  std::size_t nbytes() const {
    return static_cast<std::size_t>(numel()) * core::dtype_size(dtype());
  }

  // Pointer to the first element (storage + offset) of a host tensor, for CPU kernels. T must
  // match dtype; a device tensor is a DeviceError (its memory is the device's; raw_data()
  // gives its address for device kernels and copies).
  template <class T>
  T* data() const {
    RINGLET_CHECK(core::dtype_of<T>() == dtype(), DTypeError, "data<", core::dtype_of<T>(),
                  ">() on a tensor of dtype ", dtype());
    RINGLET_CHECK(device().is_cpu(), DeviceError, "data<", core::dtype_of<T>(),
                  ">(): the tensor is on ", device(), "; copy it to the host with .cpu()");
    return static_cast<T*>(raw_data());
  }
  void* raw_data() const;

  // The single value of a one-element tensor, converted to double / int64.
  double item() const;
  // All values in logical (row-major) order, converted to T (copies from any device).
  template <class T>
  std::vector<T> to_vector() const;

  // --- conversions and views (see tensor/ops/movement.h for the full set) ---
  Tensor contiguous() const;
  Tensor clone() const;
  Tensor to(DType dtype) const;
  // Stream-ordered copy to another device (tensor/device/transfer.h): non_blocking returns
  // before a device -> host copy has run (into pinned memory; synchronize before reading).
  Tensor to(Device device, bool non_blocking = false) const;
  Tensor cpu() const { return to(Device::cpu()); }
  bool is_pinned() const { return storage()->pinned(); }
  Tensor pin_memory() const;
  Tensor reshape(const Shape& shape) const;
  Tensor view(const Shape& shape) const;
  Tensor transpose(std::int64_t a, std::int64_t b) const;
  Tensor permute(const Shape& dims) const;

  // --- autograd ---
  bool requires_grad() const { return impl().requires_grad; }
  Tensor& requires_grad_(bool value = true);
  bool is_leaf() const { return impl().grad_fn == nullptr; }
  const std::shared_ptr<Node>& grad_fn() const { return impl().grad_fn; }
  Tensor grad() const { return Tensor(impl().grad); }
  void set_grad(const Tensor& grad) const { impl_->grad = grad.impl_; }
  // Reverse-mode pass from this tensor. `gradient` defaults to 1 for a one-element tensor.
  void backward(const Tensor& gradient = {}, bool retain_graph = false) const;
  // Same data, cut from the graph.
  Tensor detach() const;
  // Called with this leaf's accumulated .grad once its gradient for a backward is final.
  void register_hook(GradHook hook) const;

  std::string str() const;  // shape, dtype, device and (truncated) values
  friend std::ostream& operator<<(std::ostream& out, const Tensor& t) { return out << t.str(); }

  TensorImpl& impl() const {
    RINGLET_CHECK(impl_ != nullptr, ValueError, "use of an undefined tensor");
    return *impl_;
  }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& other) const { return impl_ == other.impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// Normalizes a possibly negative dim against `ndim` ("op" names the caller in errors).
std::int64_t wrap_dim(std::int64_t dim, std::int64_t ndim, const char* op);

}  // namespace ringlet::tensor
