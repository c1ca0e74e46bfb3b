// The emulated GPU's memory (shared mappings of memfd files, so that another process can map an
// allocation: the emulator's IPC), streams (StreamQueue) and events (a record
// count and a completed count under a mutex: record queues "completed = n", wait queues
// "block until completed >= n", both on the stream's own thread).
#include "device/emu/emu_runtime.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/env.h"
#include "core/error.h"
#include "device/counters.h"
#include "device/emu/reachable.h"
#include "device/op_context.h"

namespace ringlet::device::emu {
namespace {

struct EmuEvent {
  std::mutex mutex;
  std::condition_variable changed;
  std::uint64_t recorded = 0;   // records queued
  std::uint64_t completed = 0;  // the last record that has run
};

// A handle owns one reference; queued records and waits hold their own, so destroying an
// event with work still queued on it is safe (as cudaEventDestroy).
using EventRef = std::shared_ptr<EmuEvent>;
const EventRef& event_of(device::EventHandle event) { return *static_cast<EventRef*>(event); }

// Blocks until the event's record number `target` has run, within the device deadline.
void wait_for_record(EmuEvent& e, std::uint64_t target, const char* who) {
  std::unique_lock lock(e.mutex);
  const auto timeout = device::wait_timeout();
  if (!e.changed.wait_for(lock, timeout, [&] { return e.completed >= target; })) {
    RINGLET_THROW(TimeoutError, who, ": an event was not reached within ", timeout.count(),
                  " ms (RINGLET_DEVICE_TIMEOUT sets the deadline)");
  }
}

// A captured graph: the tasks, shared with every launch still queued (destroying the graph
// while a replay waits on a stream is safe, as cudaGraphExecDestroy).
struct EmuGraph {
  std::shared_ptr<const std::vector<std::function<void()>>> tasks;
};

// The error for work a capture cannot hold, naming the op that queued it.
[[noreturn]] void refuse_in_capture(core::Device device, const std::string& what) {
  RINGLET_THROW(CaptureError, device, ": ", what, " cannot be captured into a graph (while ",
                "capturing, in ", device::current_op(), ")");
}

}  // namespace

EmuRuntime::EmuRuntime(int index)
    : index_(index),
      capacity_(static_cast<std::size_t>(
                    core::env_int("RINGLET_EMU_MEMORY_MB", 4096, 1, std::int64_t{1} << 24))
                << 20),
      compute_(std::make_unique<StreamQueue>(core::Device::emu(index),
                                             core::str("emu:", index, " compute stream"),
                                             static_cast<std::uint64_t>(index) << 32)) {
  add_reachable(error_words_, sizeof error_words_);
}

EmuRuntime::~EmuRuntime() { remove_reachable(error_words_); }

void* EmuRuntime::malloc(std::size_t bytes) {
  if (bytes == 0) bytes = 1;
  {
    std::lock_guard lock(memory_mutex_);
    if (bytes > capacity_ - std::min(mapped_, capacity_)) return nullptr;
    mapped_ += bytes;
  }
  const auto give_back = [&] {
    std::lock_guard lock(memory_mutex_);
    mapped_ -= bytes;
  };
  // A memfd per allocation: what ipc_export names (cudaMalloc memory is always exportable).
  const int fd = ::memfd_create("ringlet-emu", MFD_CLOEXEC);
  if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    if (fd >= 0) ::close(fd);
    give_back();
    return nullptr;
  }
  void* ptr = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (ptr == MAP_FAILED) {
    ::close(fd);
    give_back();
    return nullptr;
  }
  std::memset(ptr, 0xff, bytes);  // never-written memory reads as NaN
  device::count_driver_alloc(device());
  std::lock_guard lock(memory_mutex_);
  mappings_[ptr] = Mapping{bytes, fd};
  add_reachable(ptr, bytes);
  return ptr;
}

void EmuRuntime::drain_streams() {
  std::lock_guard lock(streams_mutex_);
  compute_->wait_idle();
  for (StreamQueue* q : streams_) q->wait_idle();
}

void EmuRuntime::free(void* ptr) {
  if (ptr == nullptr) return;
  device::count_host_sync(device());  // as cudaFree, it waits for the device
  drain_streams();
  std::size_t bytes = 0;
  {
    std::lock_guard lock(memory_mutex_);
    const auto it = mappings_.find(ptr);
    RINGLET_CHECK(it != mappings_.end(), DeviceError, device(), ": free of ", ptr,
                  ", which this device did not allocate");
    bytes = it->second.bytes;
    ::close(it->second.fd);
    mappings_.erase(it);
    remove_reachable(ptr);
    mapped_ -= bytes;
  }
  ::munmap(ptr, bytes);
}

// The handle: "pid fd bytes". The peer opens the memfd through /proc/<pid>/fd/<fd> (same user;
// the descriptor stays open while the allocation lives).
std::string EmuRuntime::ipc_export(void* ptr) {
  std::lock_guard lock(memory_mutex_);
  const auto it = mappings_.find(ptr);
  RINGLET_CHECK(it != mappings_.end(), DeviceError, device(), ": ipc_export of ", ptr,
                ", which is not an allocation of this device");
  return core::str(::getpid(), " ", it->second.fd, " ", it->second.bytes);
}

void* EmuRuntime::ipc_open(const std::string& handle) {
  long pid = 0, fd = -1;
  unsigned long long bytes = 0;
  RINGLET_CHECK(std::sscanf(handle.c_str(), "%ld %ld %llu", &pid, &fd, &bytes) == 3 && bytes > 0,
                DeviceError, device(), ": \"", handle,
                "\" is not an IPC handle of the emulated device");
  RINGLET_CHECK(pid != ::getpid(), DeviceError, device(),
                ": an IPC handle cannot be opened in the process that exported it");
  const std::string path = core::str("/proc/", pid, "/fd/", fd);
  const int file = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  RINGLET_CHECK(file >= 0, DeviceError, device(), ": cannot open the IPC handle of process ", pid,
                " (", path, "): ", std::strerror(errno), " (has it exited?)");
  void* ptr = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, file, 0);
  ::close(file);
  RINGLET_CHECK(ptr != MAP_FAILED, DeviceError, device(), ": cannot map the IPC handle of process ",
                pid, ": ", std::strerror(errno));
  std::lock_guard lock(memory_mutex_);
  opened_[ptr] = static_cast<std::size_t>(bytes);
  add_reachable(ptr, static_cast<std::size_t>(bytes));
  return ptr;
}

void EmuRuntime::ipc_close(void* ptr) {
  std::size_t bytes = 0;
  {
    std::lock_guard lock(memory_mutex_);
    const auto it = opened_.find(ptr);
    RINGLET_CHECK(it != opened_.end(), DeviceError, device(), ": ipc_close of ", ptr,
                  ", which ipc_open did not map");
    bytes = it->second;
    opened_.erase(it);
  }
  remove_reachable(ptr);
  drain_streams();  // no queued kernel still reads the peer's memory
  ::munmap(ptr, bytes);
}

device::StreamHandle EmuRuntime::create_stream() {
  const std::uint64_t id = ++next_stream_;
  auto* q = new StreamQueue(device(), core::str("emu:", index_, " stream ", id),
                            (static_cast<std::uint64_t>(index_) << 32) | id);
  std::lock_guard lock(streams_mutex_);
  streams_.insert(q);
  return q;
}

void EmuRuntime::destroy_stream(device::StreamHandle stream) {
  RINGLET_CHECK(stream != compute_.get(), DeviceError, device(),
                ": the compute stream cannot be destroyed");
  {
    std::lock_guard lock(streams_mutex_);
    streams_.erase(&queue(stream));
  }
  delete &queue(stream);  // runs what is queued first
}

void EmuRuntime::copy_async(void* dst, const void* src, std::size_t bytes,
                            device::StreamHandle stream) {
  if (bytes == 0) return;
  device::count_stream_ops(device());
  queue(stream).enqueue([dst, src, bytes] { std::memcpy(dst, src, bytes); });
}

void EmuRuntime::host_func(device::StreamHandle stream, std::function<void()> fn) {
  if (queue(stream).capturing()) {
    refuse_in_capture(device(),
                      "a host function (an upload from pageable host memory, or a "
                      "callback on the stream)");
  }
  device::count_stream_ops(device());
  queue(stream).enqueue(std::move(fn));
}

void EmuRuntime::synchronize(device::StreamHandle stream) {
  if (queue(stream).capturing()) {
    refuse_in_capture(device(),
                      "a wait of the host for the stream (a host read: item(), cpu(), "
                      "to_vector)");
  }
  device::count_host_sync(device());
  queue(stream).synchronize();
}

device::EventHandle EmuRuntime::create_event() {
  return new EventRef(std::make_shared<EmuEvent>());
}
void EmuRuntime::destroy_event(device::EventHandle event) { delete static_cast<EventRef*>(event); }

void EmuRuntime::record(device::EventHandle event, device::StreamHandle stream) {
  EventRef e = event_of(event);
  std::uint64_t number = 0;
  {
    std::lock_guard lock(e->mutex);
    number = ++e->recorded;
  }
  queue(stream).enqueue([e, number] {
    {
      std::lock_guard lock(e->mutex);
      e->completed = std::max(e->completed, number);
    }
    e->changed.notify_all();
  });
}

void EmuRuntime::wait(device::StreamHandle stream, device::EventHandle event) {
  EventRef e = event_of(event);
  std::uint64_t target = 0;
  {
    std::lock_guard lock(e->mutex);
    target = e->recorded;
  }
  if (target == 0) return;
  StreamQueue& q = queue(stream);
  q.enqueue([e, target, name = q.name()] { wait_for_record(*e, target, name.c_str()); });
}

bool EmuRuntime::query(device::EventHandle event) {
  EmuEvent& e = *event_of(event);
  std::lock_guard lock(e.mutex);
  return e.completed >= e.recorded;
}

void EmuRuntime::synchronize_event(device::EventHandle event) {
  if (capturing()) refuse_in_capture(device(), "a wait of the host for an event");
  device::count_host_sync(device());
  EmuEvent& e = *event_of(event);
  std::uint64_t target = 0;
  {
    std::lock_guard lock(e.mutex);
    target = e.recorded;
  }
  wait_for_record(e, target, "event synchronize");
}

void EmuRuntime::begin_capture(device::StreamHandle stream) {
  queue(stream).begin_capture();
  ++captures_;
}

device::GraphHandle EmuRuntime::end_capture(device::StreamHandle stream) {
  auto tasks = queue(stream).end_capture();
  --captures_;
  return new EmuGraph{std::make_shared<const std::vector<std::function<void()>>>(std::move(tasks))};
}

void EmuRuntime::launch_graph(device::GraphHandle graph, device::StreamHandle stream) {
  device::count_stream_ops(device());
  queue(stream).enqueue([tasks = static_cast<EmuGraph*>(graph)->tasks] {
    for (const auto& task : *tasks) task();
  });
}

void EmuRuntime::destroy_graph(device::GraphHandle graph) { delete static_cast<EmuGraph*>(graph); }

// Flags are plain words of shared mappings: the write is a release store, the wait polls with
// acquire loads (yielding first, then sleeping up to 100 us), so what the writer's stream wrote
// before the flag is visible after it, in another process too.
void EmuRuntime::write_value32(void* addr, std::uint32_t value, device::StreamHandle stream) {
  device::count_stream_ops(device());
  queue(stream).enqueue([addr, value] {
    std::atomic_ref(*static_cast<std::uint32_t*>(addr)).store(value, std::memory_order_release);
  });
}

void EmuRuntime::wait_value32(void* addr, std::uint32_t value, device::StreamHandle stream) {
  device::count_stream_ops(device());
  StreamQueue& q = queue(stream);
  q.enqueue([addr, value, name = q.name()] {
    const std::atomic_ref flag(*static_cast<std::uint32_t*>(addr));
    const auto timeout = device::wait_timeout();
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    auto pause = std::chrono::microseconds(2);
    for (int spins = 0; flag.load(std::memory_order_acquire) != value; ++spins) {
      if (spins < 64) {
        std::this_thread::yield();
        continue;
      }
      RINGLET_CHECK(std::chrono::steady_clock::now() < deadline, TimeoutError, name,
                    ": a flag wait (", addr, " == ", value, ") was not satisfied within ",
                    timeout.count(), " ms (RINGLET_DEVICE_TIMEOUT sets the deadline)");
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(100));
    }
  });
}

void* EmuRuntime::host_alloc_pinned(std::size_t bytes) {
  device::count_driver_alloc(device());
  void* ptr = std::aligned_alloc(64, (std::max<std::size_t>(bytes, 1) + 63) / 64 * 64);
  RINGLET_CHECK(ptr != nullptr, OutOfMemoryError, "pinned host memory: ", bytes,
                " bytes could not be allocated");
  add_reachable(ptr, bytes);
  return ptr;
}

void EmuRuntime::host_free_pinned(void* ptr) {
  remove_reachable(ptr);
  std::free(ptr);
}

}  // namespace ringlet::device::emu
