// Moving tensors between the host and a device, in stream order (as PyTorch's .to()):
// - host -> device queues the copy on the target's current stream and returns. From pinned
//   memory it copies straight out of the tensor's storage (kept alive until the copy has
//   run); from pageable memory it first copies into a pinned staging block on the host, so the
//   caller may change or free the source at once (what the CUDA driver does for pageable
//   memory).
// - device -> host queues the copy on the source's current stream; blocking (the default) it
//   waits for it; non_blocking it returns at once with a pinned result that must not be read
//   before the stream (or an event recorded after the copy) is synchronized.
// - device -> another device goes through the host.
#pragma once

#include "device/stream.h"
#include "tensor/tensor.h"

namespace ringlet::tensor {

Tensor transfer(const Tensor& src, Device target, bool non_blocking);
// Copies a host tensor into an existing contiguous device tensor of its dtype and shape, staged
// as above: one copy on the target's current stream (a static input of a captured graph is
// refilled so, before each replay).
void upload_into(const Tensor& host, Tensor& target);
// A copy of a host tensor in pinned memory (Tensor::pin_memory()).
Tensor pin_memory(const Tensor& host);
// Marks t's memory as used on `stream` too (torch's record_stream): when t is freed, its block
// is not reused until `stream` has passed the point where this was called.
void record_stream(const Tensor& t, const device::Stream& stream);

}  // namespace ringlet::tensor
