// A device's sticky error: kernels that meet bad input (a class label out of range) record it
// in two words of host memory the device writes directly (mapped pinned memory on a GPU, plain
// memory on the emulated device), instead of the host reading a verdict back after each op.
// The host looks at it after every synchronization it makes anyway (a stream, event or device
// synchronize, a blocking read) and throws there, naming the op and the bad value: as a CUDA
// device-side assert, the error surfaces at the next synchronizing call, not at the op. Once
// thrown it is cleared.
#pragma once

#include <cstdint>
#include <string>

#include "core/device.h"

namespace ringlet::device {

// What a kernel found. The packed word keeps what one thread saw together (several may write).
enum class StickyCode : std::uint64_t { none = 0, cross_entropy_label = 1, nll_loss_label = 2 };

// The words a kernel writes: [0] code << 56 | index (24 bits) << 32 | value (32 bits,
// saturated), [1] the limit (the number of classes).
std::uint64_t* sticky_error_words(core::Device device);

// Throws ValueError describing the recorded error, if any (and clears it). A no-op on the host.
// A failure the host posted for the device's work comes first: a CollectiveError.
void raise_sticky_error(core::Device device);

// A failure the host found for work queued on `device` (a collective whose peer died, released
// so that the device's queue drains): the device's next synchronization throws it, once, as a
// CollectiveError with `message`. The first posted stays until then.
void post_device_failure(core::Device device, const std::string& message);

}  // namespace ringlet::device
