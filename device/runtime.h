// The device runtime both executors implement: a CUDA GPU (device/cuda/device_runtime.cu) and
// the emulated GPU (tensor/emu/). Memory, streams, events and asynchronous copies, with CUDA's
// semantics: work on one stream runs in the order it was queued; streams run concurrently
// with each other and with the host; an event marks a point in a stream that another stream
// or the host can wait for. Handles are opaque (a cudaStream_t / cudaEvent_t, or the
// emulator's objects); Stream and Event in stream.h wrap them for the tensor layer.
// Every wait of the host on a device has a deadline (RINGLET_DEVICE_TIMEOUT seconds, default
// 300): a device that never finishes is a TimeoutError naming the device, not a hang.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "core/device.h"

namespace ringlet::device {

using core::Device;
using StreamHandle = void*;
using EventHandle = void*;
using GraphHandle = void*;

class Runtime {
 public:
  virtual ~Runtime() = default;
  virtual Device device() const = 0;
  virtual std::size_t memory_capacity() const = 0;
  // Makes this device the calling thread's current one (cudaSetDevice), so that kernels and
  // library calls that follow run on it. Nothing to do on the emulated device.
  virtual void make_current() {}

  // Device memory; nullptr when the device is out of memory (the caching allocator then gives
  // back what it holds and tries once more).
  virtual void* malloc(std::size_t bytes) = 0;
  virtual void free(void* ptr) = 0;

  // The compute stream every op of this device queues on unless a StreamGuard says otherwise.
  virtual StreamHandle compute_stream() = 0;
  virtual StreamHandle create_stream() = 0;
  virtual void destroy_stream(StreamHandle stream) = 0;

  // Queues a copy between any two of host memory and this device's memory. Host memory must
  // stay valid and unchanged until the copy has run: callers stage pageable memory (see
  // tensor/device/transfer.h).
  virtual void copy_async(void* dst, const void* src, std::size_t bytes, StreamHandle stream) = 0;
  // Queues fn to run on a host thread once everything queued before it on `stream` has run
  // (cudaLaunchHostFunc). fn must not queue device work.
  virtual void host_func(StreamHandle stream, std::function<void()> fn) = 0;
  // Whether fn may block until other work of this device has run: on the emulated device (each
  // stream is a thread of its own); not on a GPU, whose callback thread that work may need.
  virtual bool host_functions_may_block() const = 0;
  // Blocks the host until everything queued on `stream` has run; rethrows a kernel's failure.
  virtual void synchronize(StreamHandle stream) = 0;

  virtual EventHandle create_event() = 0;
  virtual void destroy_event(EventHandle event) = 0;
  // Marks the current end of `stream`'s queue.
  virtual void record(EventHandle event, StreamHandle stream) = 0;
  // Work queued on `stream` after this call waits until the event's last record has run; the
  // host does not wait. An event never recorded is complete.
  virtual void wait(StreamHandle stream, EventHandle event) = 0;
  virtual bool query(EventHandle event) = 0;
  virtual void synchronize_event(EventHandle event) = 0;

  // Host memory the device copies from and into asynchronously (cudaHostAlloc); kernels of
  // this device may read and write it at the same address (mapped pinned memory).
  virtual void* host_alloc_pinned(std::size_t bytes) = 0;
  virtual void host_free_pinned(void* ptr) = 0;

  // Two 64-bit words of host memory kernels of this device write directly (mapped pinned
  // memory on a GPU): the device's sticky error (device/sticky_error.h).
  virtual void* error_words() = 0;

  // Graph capture (CUDA's stream capture, in thread-local mode): between begin_capture and
  // end_capture, work queued on `stream` is recorded instead of run; end_capture returns it as
  // a graph that launch_graph queues, whole, as one stream operation (the same kernels on the
  // same memory, in the same order). What a capture cannot hold is refused with a CaptureError
  // while capturing: a synchronize of the stream or of an event, a host function. (Allocations
  // are refused by the caching allocator: tensor/device/graph.h.)
  virtual void begin_capture(StreamHandle stream) = 0;
  virtual GraphHandle end_capture(StreamHandle stream) = 0;
  virtual void launch_graph(GraphHandle graph, StreamHandle stream) = 0;
  virtual void destroy_graph(GraphHandle graph) = 0;
  // Whether some stream of this device is capturing now; whether `stream` is.
  virtual bool capturing() const = 0;
  virtual bool is_capturing(StreamHandle stream) = 0;

  // Stream memory operations: 32-bit flags in device memory (this device's, or a peer's opened
  // over IPC) that the device writes and waits for, so that ranks synchronize with no host in the
  // loop (collectives/device_collectives.h). write_value32 queues `*addr = value`, made visible
  // after every write of the work queued before it; wait_value32 queues a wait: the stream's
  // later work starts once `*addr == value`. Both may be captured. On a GPU they are the
  // driver's stream memory operations where stream_memory_ops() says so (the wait holds the
  // stream in the GPU's front end; no kernel spins), else one-thread kernels, whose wait spins
  // and so may only wait for a flag that a kernel of this same process sets. On the emulated
  // device the stream's thread polls the flag, within the device deadline.
  virtual void write_value32(void* addr, std::uint32_t value, StreamHandle stream) = 0;
  virtual void wait_value32(void* addr, std::uint32_t value, StreamHandle stream) = 0;
  virtual bool stream_memory_ops() = 0;

  // Inter-process memory, as cudaIpcGetMemHandle / cudaIpcOpenMemHandle: ipc_export names
  // memory that malloc() returned (the whole allocation) by a string another process of this
  // host passes to ipc_open, which maps it there (on any device's runtime: kernels of one
  // device may read another's memory, as CUDA's peer access) until ipc_close. Opening a handle
  // exported by the same process is refused, as CUDA refuses it.
  virtual std::string ipc_export(void* ptr) = 0;
  virtual void* ipc_open(const std::string& handle) = 0;
  virtual void ipc_close(void* ptr) = 0;
};

// Number of devices of a kind: CUDA GPUs visible (0 without a GPU; NotBuiltError in a build
// without CUDA), emulated devices (RINGLET_EMU_DEVICES, default 2). 1 for cpu.
int device_count(Device::Kind kind);
// The CUDA GPUs this process can use: device_count(cuda), and 0 in a build without CUDA.
int usable_gpu_count();
// The runtime of one device; a DeviceError names the devices that exist when it does not.
Runtime& runtime(Device device);
// Checks that `device` exists (any kind), with the same error as runtime().
void check_device(Device device);

// The host's deadline for waits on a device (RINGLET_DEVICE_TIMEOUT seconds; tests set it).
std::chrono::milliseconds wait_timeout();
void set_wait_timeout(std::chrono::milliseconds timeout);

}  // namespace ringlet::device
