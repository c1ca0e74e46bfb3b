// BufferSpace: where a collective's buffers live, as the algorithms see it. Host buffers need
// none (the algorithms load and store them directly, as they always have); a device's buffers
// come with a space (device_space.h: one device's, on the device runtime) through which the
// algorithms move and combine them:
// - copy and reduce_into queue work on the space's communication stream; either side may be
//   the device's memory, a peer's device memory mapped over IPC, or the space's pinned host
//   staging (which the device reads and writes at the same address, as mapped pinned memory).
// - fence() waits until everything queued has run: before a message tells a peer that memory
//   is ready, and before staging is reused. It is a host wait, counted for the calling thread
//   (host_waits_here), which is how the communicator counts its ops' host waits.
// - copy_now() is the one blocking copy, on a stream of its own (for completions).
// - order_after_caller() runs on the caller's thread when the op is issued and returns what the
//   progress thread runs first: making the communication stream wait for the caller's stream
//   (an event), so the op sees what the caller queued before it, as with NCCL.
// The reduction itself runs on the device: the space queues the device's reduction kernels.
// Device collectives with no host in the loop (device_collectives.h): a space whose ranks can
// signal each other through flags in their device windows has device_flags(), the DeviceSpace
// that issues each op there, from the caller's thread, instead of on the progress thread with
// fences and messages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "collectives/types.h"

namespace ringlet::collectives {

class DeviceSpace;  // device_space.h

// Host waits for a device made on this thread so far (fence() counts them).
inline std::uint64_t& host_waits_here() {
  thread_local std::uint64_t count = 0;
  return count;
}

class BufferSpace {
 public:
  virtual ~BufferSpace() = default;
  // A name for messages ("emu:0", "cuda:1").
  virtual std::string name() const = 0;

  virtual std::function<void()> order_after_caller() = 0;
  virtual void copy(void* dst, const void* src, std::size_t bytes) = 0;
  // dst[i] = op(dst[i], src[i]); avg is refused (sum, then divide_by).
  virtual void reduce_into(void* dst, const void* src, std::size_t count, DType dtype,
                           ReduceOp op) = 0;
  virtual void divide_by(void* data, std::size_t count, DType dtype, int divisor) = 0;
  void fence() {
    ++host_waits_here();
    wait_for_device();
  }

  // Pinned host memory, `slot` 0..3, at least `bytes`, kept across ops.
  virtual char* staging(int slot, std::size_t bytes) = 0;
  // Device memory of the space, at least `bytes`, kept across ops (reduce_scatter's and
  // reduce's working copy).
  virtual char* scratch(std::size_t bytes) = 0;
  // Pinned host memory of one's own, for a send or recv that outlives the progress thread's
  // turn (their requests complete later, overlapping other ops).
  virtual std::shared_ptr<char> host_buffer(std::size_t bytes) = 0;
  // A copy that has run when it returns, on a stream of its own: a recv's completion copies
  // its message into place with it, off the progress thread.
  virtual void copy_now(void* dst, const void* src, std::size_t bytes) = 0;

  // Device windows shared over IPC (every rank on one host): windows()[p] is rank p's window
  // as mapped here; empty when the ranks have none (then the ops are staged through the host
  // connections).
  virtual const std::vector<std::byte*>& windows() const = 0;
  virtual std::size_t window_bytes() const = 0;

  // The space whose ranks run collectives with device flags (see above); null when they don't.
  virtual const DeviceSpace* device_flags() const { return nullptr; }
  DeviceSpace* device_flags() {
    return const_cast<DeviceSpace*>(std::as_const(*this).device_flags());
  }

 protected:
  virtual void wait_for_device() = 0;  // fence()'s wait
};

// `dst = own op src` for a space: own == dst in place.
inline void reduce_pair(BufferSpace& space, void* dst, const void* own, const void* src,
                        std::size_t count, DType dtype, ReduceOp op) {
  if (own != dst) space.copy(dst, own, count * core::dtype_size(dtype));
  space.reduce_into(dst, src, count, dtype, op);
}

}  // namespace ringlet::collectives
