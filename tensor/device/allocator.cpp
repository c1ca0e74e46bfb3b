// DeviceAllocator: BlockCache tags are stream handles; blocks used on other streams wait in
// pending_ until an event per such stream has completed.
#include "tensor/device/allocator.h"

#include <array>
#include <cstdlib>

#include "core/error.h"
#include "device/op_context.h"
#include "device/stream.h"

namespace ringlet::tensor {
namespace {

constexpr std::size_t kDeviceGranule = 512;  // PyTorch's: every size cached, 512-byte classes

std::uintptr_t tag(device::StreamHandle stream) { return reinterpret_cast<std::uintptr_t>(stream); }

}  // namespace

DeviceAllocator::DeviceAllocator(Device device)
    : device_(device),
      runtime_(device::runtime(device)),
      cache_({.allocate =
                  [this](std::size_t bytes) {
                    // Called with mutex_ held: a cache miss while a stream captures.
                    RINGLET_CHECK(capture_stream_ == nullptr, CaptureError, device_, ": ", bytes,
                                  " bytes that the allocator's cache does not hold (a new "
                                  "allocation reaches the driver, which a graph capture cannot "
                                  "hold; run the work once before capturing it, so that the cache "
                                  "holds its blocks), in ",
                                  device::current_op());
                    return runtime_.malloc(bytes);
                  },
              .release = [this](void* ptr) { runtime_.free(ptr); },
              .name = core::str(device, " (capacity ", device::runtime(device).memory_capacity(),
                                " bytes)")},
             kDeviceGranule, 0, SIZE_MAX) {}

void* DeviceAllocator::allocate(std::size_t bytes) {
  const device::StreamHandle stream = device::current_stream(device_).handle();
  std::lock_guard lock(mutex_);
  const bool captured = capture_stream_ != nullptr && stream == capture_stream_;
  if (captured && bytes > 0) {  // the pool's own freed blocks first
    std::vector<PoolBlock>& free = pools_[capture_pool_];
    const std::size_t size = cache_.size_class(bytes);
    for (auto it = free.begin(); it != free.end(); ++it) {
      if (it->size != size) continue;
      void* ptr = it->ptr;
      free.erase(it);
      live_[ptr] = Live{stream, {}, capture_pool_};
      return ptr;
    }
  }
  if (captured) {
    // Blocks still waiting for other streams cannot be waited for now: leave them.
  } else {
    collect_pending(false);
  }
  void* ptr = nullptr;
  try {
    ptr = cache_.allocate(bytes, tag(stream));
  } catch (const core::OutOfMemoryError&) {
    if (pending_.empty() || captured) throw;
    collect_pending(true);  // blocks other streams still read: wait for them, then retry
    ptr = cache_.allocate(bytes, tag(stream));
  }
  if (ptr != nullptr) live_[ptr] = Live{stream, {}, captured ? capture_pool_ : 0};
  return ptr;
}

void DeviceAllocator::deallocate(void* ptr, std::size_t bytes) {
  if (ptr == nullptr) return;
  std::lock_guard lock(mutex_);
  const auto it = live_.find(ptr);
  RINGLET_CHECK(it != live_.end(), DeviceError, device_, ": free of a block (", ptr,
                ") this allocator does not hold");
  Live live = std::move(it->second);
  live_.erase(it);
  if (live.pool != 0) {  // the graph's: it waits in the graph's pool
    const auto pool = pools_.find(live.pool);
    if (pool != pools_.end()) {
      pool->second.push_back(PoolBlock{ptr, cache_.size_class(bytes), live.stream});
      return;
    }
  }
  if (live.used_on.empty()) {
    cache_.deallocate(ptr, bytes, tag(live.stream));
    return;
  }
  Pending p{ptr, bytes, live.stream, {}};
  for (device::StreamHandle s : live.used_on) {
    p.events.push_back(runtime_.create_event());
    runtime_.record(p.events.back(), s);
  }
  pending_.push_back(std::move(p));
}

void DeviceAllocator::record_stream(void* ptr, device::StreamHandle stream) {
  std::lock_guard lock(mutex_);
  const auto it = live_.find(ptr);
  if (it == live_.end() || it->second.stream == stream) return;
  for (device::StreamHandle s : it->second.used_on)
    if (s == stream) return;
  it->second.used_on.push_back(stream);
}

void DeviceAllocator::collect_pending(bool wait) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    bool done = true;
    for (device::EventHandle e : it->events) {
      if (wait) runtime_.synchronize_event(e);
      done = done && runtime_.query(e);
    }
    if (!done) {
      ++it;
      continue;
    }
    for (device::EventHandle e : it->events) runtime_.destroy_event(e);
    cache_.deallocate(it->ptr, it->bytes, tag(it->stream));
    it = pending_.erase(it);
  }
}

int DeviceAllocator::begin_capture(device::StreamHandle stream) {
  std::lock_guard lock(mutex_);
  RINGLET_CHECK(capture_stream_ == nullptr, CaptureError, device_,
                ": a graph capture is already in progress on this device");
  capture_stream_ = stream;
  capture_pool_ = ++next_pool_;
  pools_[capture_pool_];
  return capture_pool_;
}

void DeviceAllocator::end_capture() {
  std::lock_guard lock(mutex_);
  capture_stream_ = nullptr;
  capture_pool_ = 0;
}

void DeviceAllocator::release_pool(int pool) {
  std::lock_guard lock(mutex_);
  const auto it = pools_.find(pool);
  if (it == pools_.end()) return;
  for (const PoolBlock& b : it->second) cache_.deallocate(b.ptr, b.size, tag(b.stream));
  pools_.erase(it);
  for (auto& [ptr, live] : live_) {
    if (live.pool == pool) live.pool = 0;
  }
}

BlockCacheStats DeviceAllocator::stats() const { return cache_.stats(); }

void DeviceAllocator::empty() {
  std::lock_guard lock(mutex_);
  collect_pending(false);
  cache_.empty();
}

DeviceAllocator& device_allocator(Device device) {
  device::check_device(device);
  RINGLET_CHECK(!device.is_cpu(), DeviceError, "device_allocator: cpu is not a device");
  constexpr int kMax = 16;
  static std::array<std::once_flag, 2 * kMax> once;
  static std::array<DeviceAllocator*, 2 * kMax> allocators{};
  const auto slot = static_cast<std::size_t>((device.is_cuda() ? 0 : kMax) + device.index);
  // Never destroyed: device memory must not be freed after the runtime has shut down.
  std::call_once(once[slot], [&] { allocators[slot] = new DeviceAllocator(device); });
  return *allocators[slot];
}

namespace {

class PinnedAllocator final : public Allocator {
 public:
  PinnedAllocator()
      : cache_({.allocate = [](std::size_t bytes) { return pinned_backend().allocate(bytes); },
                .release = [](void* ptr) { pinned_backend().release(ptr); },
                .name = "pinned host memory"},
               64, 0, SIZE_MAX) {}
  void* allocate(std::size_t bytes) override { return cache_.allocate(bytes); }
  void deallocate(void* ptr, std::size_t bytes) override { cache_.deallocate(ptr, bytes); }
  Device device() const override { return Device::cpu(); }
  bool pinned() const override { return true; }

 private:
  struct Backend {
    device::Runtime* gpu = nullptr;  // the first GPU's runtime when there is one
    void* allocate(std::size_t bytes) const {
      return gpu ? gpu->host_alloc_pinned(bytes) : std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    }
    void release(void* ptr) const { gpu ? gpu->host_free_pinned(ptr) : std::free(ptr); }
  };
  static const Backend& pinned_backend() {
    static const Backend backend = [] {
      Backend b;
      try {
        if (device::device_count(Device::Kind::cuda) > 0) b.gpu = &device::runtime(Device::cuda(0));
      } catch (const core::NotBuiltError&) {
      }
      return b;
    }();
    return backend;
  }
  BlockCache cache_;
};

}  // namespace

Allocator& pinned_allocator() {
  static auto* allocator = new PinnedAllocator;  // never destroyed, as the device allocators
  return *allocator;
}

}  // namespace ringlet::tensor
