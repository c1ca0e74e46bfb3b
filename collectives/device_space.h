// DeviceSpace: the BufferSpace (buffer_space.h) of one device, emu or cuda, on the device
// runtime (device/runtime.h): how a Communicator moves and reduces device buffers.
// - Copies and reductions queue on the space's communication stream; the reductions are the
//   device's kind's table (device_reduce.h: CUDA kernels on a GPU; on the emulated device the
//   host reduction kernels, run as tasks on that stream's thread, bit for bit the same).
// - Each op is ordered after the caller's current stream by an event recorded at issue.
// - Same host: every rank allocates a device window and exports it (ipc_export); the ranks
//   swap the handles through the store and open each other's (ranks that are threads of one
//   process use each other's pointers: a handle cannot be opened where it was exported).
//   Several ranks may share one device. Otherwise (other hosts, link staged, or a window that
//   cannot be opened) every op is staged through pinned host memory over the connections.
// - Device flags (device_collectives.h): with windows, where the device can wait on
//   a flag as a stream operation (or every rank is a thread of this process, where a flag kernel
//   may spin), and with the ranks' shared host blocks (device_control.h), every rank
//   agreeing, collectives run with no host in the loop: issue_on_device() queues each op on the
//   communication stream after the caller's stream (or on the caller's stream while it is being
//   captured) and its completion is an event. RINGLET_DEVICE_FLAGS=0 (or options) turns this off:
//   the windows are then driven by the host (fenced, messaged), as before.
// - wait_on_stream() makes a stream wait for a Work without blocking the host (NCCL's
//   semantics): for an op with device flags, an event wait on either device (a failure found
//   later is posted to the device: its next synchronization throws the collective's error); for
//   a host-driven op, a host function on the stream that fails it where the device's host
//   functions may block (the emulated device), else the host waits (CUDA, as PyTorch's gloo
//   backend does for CUDA tensors: a CUDA host function must not wait for other CUDA work).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "collectives/buffer_space.h"
#include "collectives/device_collectives.h"
#include "collectives/device_control.h"
#include "collectives/device_issue.h"
#include "collectives/device_reduce.h"
#include "collectives/thread_windows.h"
#include "collectives/work.h"
#include "core/deadline.h"
#include "device/stream.h"
#include "transport/store.h"

namespace ringlet::collectives {

enum class DeviceLink { automatic, ipc, staged };
// "auto", "ipc", "staged" (also "tcp" and "shm", the staged links' names in the benches).
DeviceLink parse_device_link(const std::string& text);

enum class DeviceFlags { automatic, off };

struct DeviceSpaceOptions {
  DeviceLink link = DeviceLink::automatic;
  // automatic: device flags where they can run (RINGLET_DEVICE_FLAGS=0 turns them off).
  DeviceFlags flags = DeviceFlags::automatic;
  // Each rank's device window (RINGLET_DEVICE_WINDOW_BYTES, default 16 MiB): two halves, a
  // piece of the buffer per half.
  std::size_t window_bytes = 0;  // 0: from the environment
};

// What a rank knows, before the ranks vote, of whether it can run device flags.
struct DeviceFlagsFacts {
  bool wanted = true;              // not RINGLET_DEVICE_FLAGS=0 nor DeviceFlags::off
  bool shared_host_block = false;  // the ranks share a host block (device_control.h)
  int size = 1;
  std::size_t window_bytes = 0;
  bool stream_memory_ops = false;  // the device can wait on and write a flag from a stream
  bool one_process = false;        // every rank is a thread of this process
  bool shares_a_process = false;   // another rank is
  bool cuda = false;
};
// Why this rank cannot run device flags: "" when it can.
std::string device_flags_problem(const DeviceFlagsFacts& facts);

class DeviceSpace final : public BufferSpace {
 public:
  // Collective over the store: every rank of the group calls it, with its own device. `key`
  // names the group in the store (as the communicator's name does).
  static std::unique_ptr<DeviceSpace> create(transport::Store& store, const std::string& key,
                                             int rank, int size, core::Device device,
                                             DeviceSpaceOptions options, core::Deadline deadline);
  ~DeviceSpace() override;

  core::Device device() const { return device_; }
  bool ipc() const { return !windows_.empty(); }

  std::string name() const override;
  std::function<void()> order_after_caller() override;
  void copy(void* dst, const void* src, std::size_t bytes) override;
  void reduce_into(void* dst, const void* src, std::size_t count, DType dtype,
                   ReduceOp op) override;
  void divide_by(void* data, std::size_t count, DType dtype, int divisor) override;
  char* staging(int slot, std::size_t bytes) override;
  char* scratch(std::size_t bytes) override;
  std::shared_ptr<char> host_buffer(std::size_t bytes) override;
  void copy_now(void* dst, const void* src, std::size_t bytes) override;
  const std::vector<std::byte*>& windows() const override { return windows_; }
  std::size_t window_bytes() const override { return window_bytes_; }

  const DeviceSpace* device_flags() const override { return device_sync_ ? this : nullptr; }

  // Device-side synchronization: whether the ranks agreed on device flags; the rest is only
  // called where it is true.
  bool device_sync() const { return device_sync_; }
  // The op's DeviceIssue (device_issue.h): on the caller's stream while it is being captured,
  // else on the communication stream after the caller's stream's work so far.
  std::unique_ptr<DeviceIssue> issue_on_device();
  const DeviceGroup& device_group() const { return group_; }
  DeviceControl* device_control() { return control_.get(); }
  // After a failure (`reason`): sets every flag of this rank's window, so that device waits
  // queued on them pass (what they guard is void by then), and makes the device's next
  // synchronization throw the failure. The watchdog calls it.
  void release_flags(const std::string& reason);

 protected:
  void wait_for_device() override;

 private:
  class Issue;
  explicit DeviceSpace(core::Device device);
  void open_windows(transport::Store& store, const std::string& key, int rank, int size,
                    DeviceSpaceOptions options, core::Deadline deadline);
  void agree_on_device_flags(transport::Store& store, const std::string& key, int rank, int size,
                             DeviceSpaceOptions options, core::Deadline deadline);
  void clear_own_flags();

  core::Device device_;
  device::Runtime& runtime_;
  const DeviceReduce& reduce_;                          // the device's reduction kernels
  device::Stream comm_;                                 // the ops' copies and reductions
  device::Stream p2p_;                                  // copy_now
  std::vector<std::pair<char*, std::size_t>> staging_;  // pinned, per slot
  std::pair<char*, std::size_t> scratch_{nullptr, 0};   // device memory
  std::vector<char*> retired_pinned_, retired_device_;  // outgrown, freed with the space
  SharedWindow own_window_;          // the window, while this space or a peer thread holds it
  std::vector<SharedWindow> held_;   // peer threads' windows, held while this space reads them
  std::vector<std::byte*> windows_;  // [rank] is own_window_.get(); empty without IPC
  std::vector<bool> opened_;         // [p]: windows_[p] came from ipc_open (not a thread's)
  std::size_t window_bytes_ = 0;
  bool device_sync_ = false;
  DeviceGroup group_;
  std::unique_ptr<DeviceControl> control_;
  std::unique_ptr<device::Event> after_caller_;  // reused: a wait takes its last record
  device::Stream release_;                       // release_flags' flag writes
};

// Work queued on `stream` after this call waits until `work` is done; where the device's host
// functions may block (the emulated device) the host does not wait, and a failed (or late:
// `deadline`) work fails the stream with the collective's error; on CUDA the host waits, and the
// error is thrown here.
void wait_on_stream(const WorkPtr& work, const device::Stream& stream, core::Deadline deadline);

}  // namespace ringlet::collectives
