// DeviceSpace: streams, staging, the device reductions, and the IPC windows' set-up.
#include "distributed/device_space.h"

#include <unistd.h>

#include <algorithm>

#include "collectives/cuda/reduce.h"
#include "collectives/peer_memory.h"
#include "collectives/reduce_kernels.h"
#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "tensor/device/counters.h"

namespace ringlet::distributed {
namespace {

namespace device = tensor::device;
using collectives::DType;
using collectives::ReduceOp;

constexpr int kStagingSlots = 4;

std::string host_name() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) return "?";
  return host;
}

std::size_t window_bytes_from_env() {
  return static_cast<std::size_t>(
      core::env_int("RINGLET_DEVICE_WINDOW_BYTES", 16 << 20, 4096, std::int64_t{1} << 34));
}

}  // namespace

DeviceLink parse_device_link(const std::string& text) {
  if (text == "auto") return DeviceLink::automatic;
  if (text == "ipc") return DeviceLink::ipc;
  if (text == "staged" || text == "tcp" || text == "shm") return DeviceLink::staged;
  RINGLET_THROW(ValueError, "device link \"", text,
                "\" is not one of auto, ipc, staged (tcp, shm: staged over that transport)");
}

DeviceSpace::DeviceSpace(core::Device device)
    : device_(device),
      runtime_(device::runtime(device)),
      comm_(device::new_stream(device)),
      p2p_(device::new_stream(device)),
      staging_(kStagingSlots, {nullptr, 0}) {}

std::unique_ptr<DeviceSpace> DeviceSpace::create(transport::Store& store, const std::string& key,
                                                 int rank, int size, core::Device device,
                                                 DeviceSpaceOptions options,
                                                 core::Deadline deadline) {
  RINGLET_CHECK(!device.is_cpu(), ValueError, "a device space needs a device, not the host");
  std::unique_ptr<DeviceSpace> space(new DeviceSpace(device));
  if (size > 1) space->open_windows(store, key + "/devwin/", rank, size, options, deadline);
  return space;
}

// Every rank publishes "host\nhandle" of its window (an empty handle when it has none), opens
// every peer's, and the ranks agree: windows only when every rank opened every window.
void DeviceSpace::open_windows(transport::Store& store, const std::string& key, int rank, int size,
                               DeviceSpaceOptions options, core::Deadline deadline) {
  window_bytes_ = options.window_bytes != 0 ? options.window_bytes : window_bytes_from_env();
  std::string problem, handle;
  if (options.link == DeviceLink::staged) {
    problem = "the link is staged";
  } else {
    own_window_ = static_cast<std::byte*>(runtime_.malloc(window_bytes_));
    if (own_window_ == nullptr) {
      problem = core::str(window_bytes_, " bytes of device memory for the window are not free");
    } else {
      handle = runtime_.ipc_export(own_window_);
    }
  }
  const std::string host = host_name();
  store.set(key + std::to_string(rank), host + "\n" + handle);
  std::vector<std::byte*> mapped(static_cast<std::size_t>(size), nullptr);
  mapped[rank] = own_window_;
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    const std::string value = store.get(key + std::to_string(p), deadline);
    const auto cut = value.find('\n');
    const std::string peer_host = value.substr(0, cut), peer_handle = value.substr(cut + 1);
    if (!problem.empty()) continue;
    if (peer_host != host) {
      problem = core::str("rank ", p, " is on host ", peer_host, ", this rank on ", host);
    } else if (peer_handle.empty()) {
      problem = core::str("rank ", p, " has no device window");
    } else {
      try {
        mapped[p] = static_cast<std::byte*>(runtime_.ipc_open(peer_handle));
      } catch (const std::exception& e) {
        problem = core::str("rank ", p, "'s window cannot be opened: ", e.what());
      }
    }
  }
  const bool all =
      collectives::all_ranks_agree(store, key + "ok/", rank, size, problem.empty(), deadline);
  if (all) {
    windows_ = std::move(mapped);
    return;
  }
  for (int p = 0; p < size; ++p) {
    if (p != rank && mapped[p] != nullptr) runtime_.ipc_close(mapped[p]);
  }
  if (own_window_ != nullptr) runtime_.free(own_window_);
  own_window_ = nullptr;
  RINGLET_CHECK(options.link != DeviceLink::ipc, DeviceError, "rank ", rank, " on ", device_,
                ": the ipc link needs every rank's device window open here, but ",
                problem.empty() ? "another rank could not open one" : problem);
  if (options.link == DeviceLink::automatic) {
    core::log(core::LogLevel::info, "rank ", rank, " on ", device_,
              ": device ops are staged through the host (no IPC windows: ",
              problem.empty() ? "another rank could not open one" : problem, ")");
  }
}

DeviceSpace::~DeviceSpace() {
  try {
    runtime_.synchronize(comm_.handle());
  } catch (const std::exception& e) {
    core::log(core::LogLevel::debug, device_, ": device space closing after: ", e.what());
  }
  for (std::size_t p = 0; p < windows_.size(); ++p) {
    if (windows_[p] != nullptr && windows_[p] != own_window_) runtime_.ipc_close(windows_[p]);
  }
  if (own_window_ != nullptr) runtime_.free(own_window_);
  for (auto& [ptr, bytes] : staging_) {
    if (ptr != nullptr) runtime_.host_free_pinned(ptr);
  }
  if (scratch_.first != nullptr) runtime_.free(scratch_.first);
  for (char* p : retired_pinned_) runtime_.host_free_pinned(p);
  for (char* p : retired_device_) runtime_.free(p);
}

std::string DeviceSpace::name() const { return core::str(device_); }

std::function<void()> DeviceSpace::order_after_caller() {
  auto event = std::make_shared<device::Event>(device_);
  event->record(device::current_stream(device_));
  return [event, comm = comm_] { event->wait(comm); };
}

void DeviceSpace::copy(void* dst, const void* src, std::size_t bytes) {
  runtime_.copy_async(dst, src, bytes, comm_.handle());
}

void DeviceSpace::reduce_into(void* dst, const void* src, std::size_t count, DType dtype,
                              ReduceOp op) {
  if (count == 0) return;
  if (op == ReduceOp::avg) op = ReduceOp::sum;  // the division comes once, at the end
  if (device_.is_cuda()) {
    device::count_stream_ops(device_);
    collectives::cuda::reduce_into(dst, src, count, dtype, op, device_.index, comm_.handle());
    return;
  }
  runtime_.host_func(comm_.handle(), [=] { collectives::reduce_into(dst, src, count, dtype, op); });
}

void DeviceSpace::divide_by(void* data, std::size_t count, DType dtype, int divisor) {
  if (count == 0) return;
  if (device_.is_cuda()) {
    device::count_stream_ops(device_);
    collectives::cuda::divide_by(data, count, dtype, divisor, device_.index, comm_.handle());
    return;
  }
  runtime_.host_func(comm_.handle(), [=] { collectives::divide_by(data, count, dtype, divisor); });
}

void DeviceSpace::fence() { runtime_.synchronize(comm_.handle()); }

// Buffers grow (at least doubling) and the smaller ones are kept until the space goes: a free
// in mid-run would wait for every stream of the device (as cudaFree does), and a stream may be
// waiting, in wait_on_stream, for the very op that asked for more room.
char* DeviceSpace::staging(int slot, std::size_t bytes) {
  RINGLET_CHECK(slot >= 0 && slot < kStagingSlots, ValueError, "staging slot ", slot,
                " is not in [0, ", kStagingSlots, ")");
  auto& [ptr, have] = staging_[static_cast<std::size_t>(slot)];
  if (have < bytes) {
    if (ptr != nullptr) retired_pinned_.push_back(ptr);
    have = std::max(bytes, 2 * have);
    ptr = static_cast<char*>(runtime_.host_alloc_pinned(have));
  }
  return ptr;
}

char* DeviceSpace::scratch(std::size_t bytes) {
  if (scratch_.second < bytes) {
    if (scratch_.first != nullptr) retired_device_.push_back(scratch_.first);
    const std::size_t want = std::max(bytes, 2 * scratch_.second);
    scratch_.first = static_cast<char*>(runtime_.malloc(want));
    RINGLET_CHECK(scratch_.first != nullptr, OutOfMemoryError, device_, ": ", want,
                  " bytes of collective scratch memory are not free");
    scratch_.second = want;
  }
  return scratch_.first;
}

std::shared_ptr<char> DeviceSpace::host_buffer(std::size_t bytes) {
  device::Runtime* rt = &runtime_;
  return {static_cast<char*>(rt->host_alloc_pinned(bytes)),
          [rt](char* p) { rt->host_free_pinned(p); }};
}

void DeviceSpace::copy_now(void* dst, const void* src, std::size_t bytes) {
  runtime_.copy_async(dst, src, bytes, p2p_.handle());
  runtime_.synchronize(p2p_.handle());
}

void wait_on_stream(const collectives::WorkPtr& work, const device::Stream& stream,
                    core::Deadline deadline) {
  if (stream.device().is_cuda()) {
    // A blocking host function would hold the driver's callback thread while the op's own
    // stream work (and its fences on the progress thread) need the driver: it hangs on a GPU.
    work->wait(deadline);
    return;
  }
  device::runtime(stream.device()).host_func(stream.handle(), [work, deadline] {
    work->wait(deadline);
  });
}

}  // namespace ringlet::distributed
