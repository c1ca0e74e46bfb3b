// LateReads: a pinned one-element tensor and an event per pushed scalar.
#include "tensor/device/late_reads.h"

#include "core/error.h"
#include "device/runtime.h"
#include "tensor/device/allocator.h"

namespace ringlet::tensor {

void LateReads::push(const Tensor& scalar) {
  RINGLET_CHECK(scalar.numel() == 1, ShapeError, "LateReads: a scalar has one element, not ",
                scalar.numel(), " (shape ", shape_str(scalar.shape()), ")");
  if (scalar.device().is_cpu()) {
    slots_.push_back(Slot{scalar.detach().clone(), nullptr});
    return;
  }
  const Tensor src = scalar.detach().contiguous();
  Tensor pinned = Tensor::empty({}, src.dtype()).pin_memory();
  const device::Stream stream = device::current_stream(src.device());
  device::runtime(src.device())
      .copy_async(pinned.raw_data(), src.raw_data(), src.nbytes(), stream.handle());
  auto copied = std::make_shared<device::Event>(src.device());
  copied->record(stream);
  slots_.push_back(Slot{std::move(pinned), std::move(copied)});
}

double LateReads::pop() {
  RINGLET_CHECK(!slots_.empty(), Error, "LateReads: nothing was pushed");
  Slot slot = std::move(slots_.front());
  slots_.pop_front();
  if (slot.copied) slot.copied->synchronize();
  return slot.pinned.item();
}

}  // namespace ringlet::tensor
