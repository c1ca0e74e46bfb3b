// Host <-> device copies: staging through pinned blocks, stream-ordered release of what a
// queued copy reads.
#include "tensor/device/transfer.h"

#include <cstring>

#include "tensor/device/allocator.h"

namespace ringlet::tensor {
namespace {

Tensor empty_pinned(const Shape& shape, DType dtype) {
  const std::size_t bytes = static_cast<std::size_t>(shape_numel(shape)) * core::dtype_size(dtype);
  auto storage = std::make_shared<Storage>(bytes, pinned_allocator());
  return Tensor::make_view(std::move(storage), shape, contiguous_strides(shape), 0, dtype);
}

// Queues a host function that drops `keep` once everything queued so far on `stream` has
// run: what an asynchronous copy reads stays alive until then.
void release_after(const device::Stream& stream, std::shared_ptr<Storage> keep) {
  device::runtime(stream.device()).host_func(stream.handle(), [keep = std::move(keep)]() mutable {
    keep.reset();
  });
}

// The host tensor as the source of an asynchronous copy: itself when pinned, else a pinned copy.
Tensor pinned_source(const Tensor& host) {
  Tensor src = host.contiguous();
  if (src.storage()->pinned()) return src;
  Tensor staged = empty_pinned(src.shape(), src.dtype());
  if (src.nbytes() > 0) std::memcpy(staged.raw_data(), src.raw_data(), src.nbytes());
  return staged;
}

void copy_to_device(const Tensor& host, void* dst, Device target) {
  const Tensor src = pinned_source(host);
  const device::Stream stream = device::current_stream(target);
  device::runtime(target).copy_async(dst, src.raw_data(), src.nbytes(), stream.handle());
  release_after(stream, src.storage());
}

Tensor host_to_device(const Tensor& host, Device target) {
  Tensor out = Tensor::empty(host.shape(), host.dtype(), target);
  copy_to_device(host, out.raw_data(), target);
  return out;
}

Tensor device_to_host(const Tensor& dev, bool non_blocking) {
  const Tensor src = dev.contiguous();
  Tensor out = non_blocking ? empty_pinned(src.shape(), src.dtype())
                            : Tensor::empty(src.shape(), src.dtype(), Device::cpu());
  const device::Stream stream = device::current_stream(src.device());
  device::runtime(src.device())
      .copy_async(out.raw_data(), src.raw_data(), src.nbytes(), stream.handle());
  if (non_blocking) {
    release_after(stream, out.storage());  // the copy writes into it until then
  } else {
    stream.synchronize();
  }
  return out;
}

}  // namespace

Tensor transfer(const Tensor& src, Device target, bool non_blocking) {
  if (src.device() == target) return src;
  device::check_device(target);
  if (src.device().is_cpu()) return host_to_device(src, target);
  if (target.is_cpu()) return device_to_host(src, non_blocking);
  return host_to_device(device_to_host(src, false), target);
}

void upload_into(const Tensor& host, Tensor& target) {
  RINGLET_CHECK(host.device().is_cpu() && !target.device().is_cpu() && target.is_contiguous() &&
                    host.dtype() == target.dtype() && host.shape() == target.shape(),
                DeviceError, "upload_into: a host tensor of ", host.dtype(), " ",
                shape_str(host.shape()), " into a contiguous device tensor of the same, not ",
                target.device(), " ", target.dtype(), " ", shape_str(target.shape()),
                target.is_contiguous() ? "" : " (not contiguous)");
  copy_to_device(host, target.raw_data(), target.device());
}

Tensor pin_memory(const Tensor& host) {
  RINGLET_CHECK(host.device().is_cpu(), DeviceError, "pin_memory: the tensor is on ", host.device(),
                ", not on the host");
  const Tensor src = host.contiguous();
  Tensor out = empty_pinned(src.shape(), src.dtype());
  if (src.nbytes() > 0) std::memcpy(out.raw_data(), src.raw_data(), src.nbytes());
  return out;
}

void record_stream(const Tensor& t, const device::Stream& stream) {
  RINGLET_CHECK(t.device() == stream.device(), DeviceError, "record_stream: tensor on ", t.device(),
                ", stream of ", stream.device());
  t.storage()->record_stream(stream.handle());
}

}  // namespace ringlet::tensor
