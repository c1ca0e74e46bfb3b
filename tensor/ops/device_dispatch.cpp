// Tensor -> kernel View, and the device / stream lookups.
#include "tensor/ops/device_dispatch.h"

#include "device/runtime.h"
#include "device/stream.h"

namespace ringlet::tensor {

kernels::View kernel_view(const Tensor& t) { return kernel_view(t, t.shape()); }

kernels::View kernel_view(const Tensor& t, const Shape& shape) {
  RINGLET_CHECK(shape.size() <= static_cast<std::size_t>(kernels::kMaxDims), ShapeError,
                "device kernels take at most ", kernels::kMaxDims, " dimensions, got ",
                shape_str(shape));
  RINGLET_CHECK(t.shape().size() <= shape.size(), ShapeError, "cannot broadcast ",
                shape_str(t.shape()), " to ", shape_str(shape));
  kernels::View v;
  v.data = t.raw_data();
  v.dtype = t.dtype();
  v.ndim = static_cast<int>(shape.size());
  const std::size_t lead = shape.size() - t.shape().size();
  for (std::size_t i = 0; i < shape.size(); ++i) {
    v.sizes[i] = shape[i];
    if (i < lead) continue;  // stride 0: a new leading dim broadcasts
    const std::int64_t own = t.shape()[i - lead];
    RINGLET_CHECK(own == shape[i] || own == 1, ShapeError, "cannot broadcast ",
                  shape_str(t.shape()), " to ", shape_str(shape));
    v.strides[i] = own == 1 && shape[i] != 1 ? 0 : t.strides()[i - lead];
  }
  return v;
}

kernels::DeviceKernels& kernels_for(Device device) {
  kernels::DeviceKernels& k = kernels::device_kernels(device);
  device::runtime(device).make_current();  // a GPU's kernels launch on that GPU
  return k;
}

kernels::Stream stream_for(Device device) { return device::current_stream(device).handle(); }

Device same_device(std::initializer_list<const Tensor*> operands, const char* op) {
  const Tensor* first = nullptr;
  for (const Tensor* t : operands) {
    if (first == nullptr) {
      first = t;
      continue;
    }
    RINGLET_CHECK(t->device() == first->device(), DeviceError, op,
                  ": expected all tensors on one device, got ", first->device(), " and ",
                  t->device());
  }
  return first->device();
}

}  // namespace ringlet::tensor
