// DeviceSpace: streams, staging, the device reductions, and the IPC windows' set-up.
#include "collectives/device_space.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "collectives/peer_memory.h"
#include "collectives/work_driver.h"
#include "core/env.h"
#include "core/error.h"
#include "core/host.h"
#include "core/log.h"
#include "device/sticky_error.h"

namespace ringlet::collectives {
namespace {

// What a peer published about its window.
struct PeerWindow {
  std::string host, handle;
  long pid = 0;
  std::uintptr_t address = 0;
};

PeerWindow parse_peer_window(const std::string& value) {
  PeerWindow peer;
  std::vector<std::string> parts;
  std::size_t begin = 0;
  for (std::size_t cut; (cut = value.find('\n', begin)) != std::string::npos; begin = cut + 1) {
    parts.push_back(value.substr(begin, cut - begin));
  }
  parts.push_back(value.substr(begin));
  RINGLET_CHECK(parts.size() == 4, DeviceError, "a device window's record \"", value,
                "\" is not host, pid, handle and address");
  peer.host = parts[0];
  peer.pid = std::stol(parts[1]);
  peer.handle = parts[2];
  peer.address = static_cast<std::uintptr_t>(std::stoull(parts[3]));
  return peer;
}

constexpr int kStagingSlots = 4;

std::size_t window_bytes_from_env() {
  return static_cast<std::size_t>(
      core::env_int("RINGLET_DEVICE_WINDOW_BYTES", 16 << 20, 4096, std::int64_t{1} << 34));
}

// A device op with device flags: an event recorded after its work, or a captured op (it runs
// whenever its graph does; nothing here waits for it).
class EventCompletion final : public DeviceCompletion {
 public:
  explicit EventCompletion(std::shared_ptr<device::Event> event) : event_(std::move(event)) {}
  bool done() override { return event_ == nullptr || event_->query(); }
  bool captured() const override { return event_ == nullptr; }
  const device::Event* event() const { return event_.get(); }

 private:
  std::shared_ptr<device::Event> event_;  // null when captured
};

}  // namespace

// One op's work on one stream: copies, the device's reductions (device_reduce.h), flag writes
// and waits.
class DeviceSpace::Issue final : public DeviceIssue {
 public:
  Issue(DeviceSpace& space, device::Stream stream, bool captured)
      : space_(space), stream_(std::move(stream)), captured_(captured) {}

  void copy(void* dst, const void* src, std::size_t bytes) override {
    space_.runtime_.copy_async(dst, src, bytes, stream_.handle());
  }
  void reduce(void* dst, const std::vector<const void*>& srcs, std::size_t count, DType dtype,
              ReduceOp op) override {
    if (count == 0) return;
    if (op == ReduceOp::avg) op = ReduceOp::sum;
    space_.reduce_.reduce_many(dst, srcs.data(), static_cast<int>(srcs.size()), count, dtype, op,
                               space_.device_, stream_.handle());
  }
  void divide_by(void* data, std::size_t count, DType dtype, int divisor) override {
    if (count == 0) return;
    space_.reduce_.divide_by(data, count, dtype, divisor, space_.device_, stream_.handle());
  }
  void signal(std::uint32_t* flag) override {
    space_.runtime_.write_value32(flag, 1, stream_.handle());
  }
  void wait_flag(std::uint32_t* flag) override {
    space_.runtime_.wait_value32(flag, 1, stream_.handle());
    space_.runtime_.write_value32(flag, 0, stream_.handle());
  }
  std::shared_ptr<DeviceCompletion> finish() override {
    if (captured_) return std::make_shared<EventCompletion>(nullptr);
    auto event = std::make_shared<device::Event>(space_.device_);
    event->record(stream_);
    return std::make_shared<EventCompletion>(std::move(event));
  }

 private:
  DeviceSpace& space_;
  device::Stream stream_;
  bool captured_;
};

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
      reduce_(device_reduce(device)),
      comm_(device::new_stream(device)),
      p2p_(device::new_stream(device)),
      staging_(kStagingSlots, {nullptr, 0}),
      after_caller_(std::make_unique<device::Event>(device)),
      release_(device::new_stream(device)) {}

std::unique_ptr<DeviceSpace> DeviceSpace::create(transport::Store& store, const std::string& key,
                                                 int rank, int size, core::Device device,
                                                 DeviceSpaceOptions options,
                                                 core::Deadline deadline) {
  RINGLET_CHECK(!device.is_cpu(), ValueError, "a device space needs a device, not the host");
  std::unique_ptr<DeviceSpace> space(new DeviceSpace(device));
  if (size > 1) space->open_windows(store, key + "/devwin/", rank, size, options, deadline);
  space->agree_on_device_flags(store, key + "/devflags/", rank, size, options, deadline);
  return space;
}

// Every rank publishes "host\npid\nhandle\naddress" of its window (an empty handle when it has
// none), opens every peer's (a rank of this same process: its address), and the ranks agree:
// windows only when every rank opened every window.
void DeviceSpace::open_windows(transport::Store& store, const std::string& key, int rank, int size,
                               DeviceSpaceOptions options, core::Deadline deadline) {
  window_bytes_ = options.window_bytes != 0 ? options.window_bytes : window_bytes_from_env();
  std::string problem, handle;
  if (options.link == DeviceLink::staged) {
    problem = "the link is staged";
  } else {
    own_window_ = allocate_thread_window(runtime_, window_bytes_);
    if (own_window_ == nullptr) {
      problem = core::str(window_bytes_, " bytes of device memory for the window are not free");
    } else {
      handle = runtime_.ipc_export(own_window_.get());
    }
  }
  const std::string host = core::host_name();
  store.set(key + std::to_string(rank),
            core::str(host, "\n", ::getpid(), "\n", handle, "\n",
                      reinterpret_cast<std::uintptr_t>(own_window_.get())));
  std::vector<std::byte*> mapped(static_cast<std::size_t>(size), nullptr);
  opened_.assign(static_cast<std::size_t>(size), false);
  mapped[rank] = own_window_.get();
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    const PeerWindow peer = parse_peer_window(store.get(key + std::to_string(p), deadline));
    if (!problem.empty()) continue;
    if (peer.host != host) {
      problem = core::str("rank ", p, " is on host ", peer.host, ", this rank on ", host);
    } else if (peer.handle.empty()) {
      problem = core::str("rank ", p, " has no device window");
    } else if (peer.pid == ::getpid()) {  // a thread of this process: held, not opened
      SharedWindow held = hold_thread_window(reinterpret_cast<const void*>(peer.address));
      if (held == nullptr) {
        problem = core::str("rank ", p, "'s window is gone (its space closed)");
      } else {
        mapped[p] = held.get();
        held_.push_back(std::move(held));
      }
    } else {
      try {
        mapped[p] = static_cast<std::byte*>(runtime_.ipc_open(peer.handle));
        opened_[p] = true;
      } catch (const std::exception& e) {
        problem = core::str("rank ", p, "'s window cannot be opened: ", e.what());
      }
    }
  }
  const bool all = all_ranks_agree(store, key + "ok/", rank, size, problem.empty(), deadline);
  if (all) {
    windows_ = std::move(mapped);
    return;
  }
  for (int p = 0; p < size; ++p) {
    if (opened_[p]) runtime_.ipc_close(mapped[p]);
  }
  opened_.clear();
  held_.clear();
  own_window_.reset();
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
    // Every stream that may still read a peer's window or write this one: the ops' (the caller's
    // with device flags), copy_now's, the flags' release.
    for (const device::StreamHandle s : {comm_.handle(), p2p_.handle(), release_.handle(),
                                         device::current_stream(device_).handle()}) {
      runtime_.synchronize(s);
    }
  } catch (const std::exception& e) {
    core::log(core::LogLevel::debug, device_, ": device space closing after: ", e.what());
  }
  control_.reset();  // tells the peers this rank left
  for (std::size_t p = 0; p < windows_.size(); ++p) {
    if (opened_[p]) runtime_.ipc_close(windows_[p]);
  }
  held_.clear();        // a peer thread's window goes with its last holder
  own_window_.reset();  // so does this one, once no peer thread holds it
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
  const void* srcs[] = {dst, src};
  reduce_.reduce_many(dst, srcs, 2, count, dtype, op, device_, comm_.handle());
}

void DeviceSpace::divide_by(void* data, std::size_t count, DType dtype, int divisor) {
  if (count == 0) return;
  reduce_.divide_by(data, count, dtype, divisor, device_, comm_.handle());
}

void DeviceSpace::wait_for_device() { runtime_.synchronize(comm_.handle()); }

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

std::string device_flags_problem(const DeviceFlagsFacts& f) {
  if (!f.wanted) return "RINGLET_DEVICE_FLAGS=0";
  if (!f.shared_host_block) return "the ranks cannot share a host block";
  if (f.size > kDeviceMaxRanks) return core::str(f.size, " ranks: at most ", kDeviceMaxRanks);
  if (f.window_bytes < kDeviceFlagBytes + 256) {
    return core::str("a window of ", f.window_bytes, " bytes leaves no room");
  }
  if (!f.stream_memory_ops && !f.one_process) {
    return "the device has no stream memory operations, and the ranks are processes";
  }
  // Ranks that are threads of one process share its CUDA driver. A thread blocked in the driver
  // (a copy to or from pageable memory waits for its stream) holds it, so a peer thread cannot
  // launch the work that sets the flag that stream waits for: on an H200, DDP with 2 ranks as
  // threads on one GPU hung so. The host-driven path has no such wait on work not yet issued.
  if (f.cuda && f.shares_a_process) {
    return "ranks that are threads of one process would wait on each other inside the CUDA "
           "driver";
  }
  return "";
}

// Device flags: when the ranks can run collectives with no host in the loop, and the group
// the protocols use. Every rank reaches the same answer (the last step is a vote).
void DeviceSpace::agree_on_device_flags(transport::Store& store, const std::string& key, int rank,
                                        int size, DeviceSpaceOptions options,
                                        core::Deadline deadline) {
  const bool wanted =
      options.flags != DeviceFlags::off && core::env_int("RINGLET_DEVICE_FLAGS", 1, 0, 1) == 1;
  if (size == 1) {  // nothing to synchronize with: the ops are copies on the device
    device_sync_ = wanted;
    group_ = DeviceGroup{0, 1, {}, 0};
    return;
  }
  if (windows_.empty()) return;  // every rank agreed on that already
  control_ = DeviceControl::connect(store, key + "control/", rank, size, deadline);
  DeviceFlagsFacts facts{wanted, control_ != nullptr, size, window_bytes_};
  if (control_ != nullptr) {
    facts.stream_memory_ops = runtime_.stream_memory_ops();
    facts.one_process = control_->one_process();
    facts.shares_a_process = control_->shares_a_process();
  }
  facts.cuda = device_.is_cuda();
  const std::string problem = device_flags_problem(facts);
  if (problem.empty()) clear_own_flags();
  const bool all = all_ranks_agree(store, key + "ok/", rank, size, problem.empty(), deadline);
  if (!all) {
    core::log(core::LogLevel::info, "rank ", rank, " on ", device_,
              ": device collectives are driven by the host (no device flags: ",
              problem.empty() ? "another rank cannot use them" : problem, ")");
    control_.reset();
    return;
  }
  device_sync_ = true;
  group_ = DeviceGroup{rank, size, windows_, window_bytes_};
}

// The flags start clear (the device's fresh memory is not zero): written before this rank votes,
// so before any peer can signal.
void DeviceSpace::clear_own_flags() {
  char* zeros = static_cast<char*>(runtime_.host_alloc_pinned(kDeviceFlagBytes));
  std::memset(zeros, 0, kDeviceFlagBytes);
  runtime_.copy_async(own_window_.get(), zeros, kDeviceFlagBytes, comm_.handle());
  runtime_.synchronize(comm_.handle());
  runtime_.host_free_pinned(zeros);
}

std::unique_ptr<DeviceIssue> DeviceSpace::issue_on_device() {
  const device::Stream caller = device::current_stream(device_);
  if (runtime_.is_capturing(caller.handle())) return std::make_unique<Issue>(*this, caller, true);
  after_caller_->record(caller);
  after_caller_->wait(comm_);
  return std::make_unique<Issue>(*this, comm_, false);
}

void DeviceSpace::release_flags(const std::string& reason) {
  if (!device_sync_ || own_window_ == nullptr) return;
  device::post_device_failure(device_, reason);
  // On a stream of its own: the communication stream may be held in a wait on these very flags.
  auto* flags = reinterpret_cast<std::uint32_t*>(own_window_.get());
  for (int i = 0; i < 2 * group_.size; ++i) runtime_.write_value32(flags + i, 1, release_.handle());
  runtime_.synchronize(release_.handle());
}

void wait_on_stream(const WorkPtr& work, const device::Stream& stream, core::Deadline deadline) {
  if (auto completion = WorkDriver::device_completion(*work)) {
    // With device flags: the stream waits for the op's event (nothing, for a captured op:
    // it was recorded on the capturing stream, in order).
    if (auto error = work->error()) std::rethrow_exception(error);
    const auto* ours = dynamic_cast<const EventCompletion*>(completion.get());
    RINGLET_CHECK(ours != nullptr, DeviceError, "wait_on_stream: ", work->describe(),
                  " ran on another kind of device space");
    if (ours->event() != nullptr) ours->event()->wait(stream);
    return;
  }
  device::Runtime& runtime = device::runtime(stream.device());
  if (!runtime.host_functions_may_block()) {
    // A blocking host function would hold the driver's callback thread while the op's own
    // stream work (and its fences on the progress thread) need the driver: it hangs on a GPU.
    work->wait(deadline);
    return;
  }
  runtime.host_func(stream.handle(), [work, deadline] { work->wait(deadline); });
}

}  // namespace ringlet::collectives
