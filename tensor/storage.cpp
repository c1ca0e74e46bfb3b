// Host allocator and Storage. Device storage goes through tensor/device/allocator.h.
#include "tensor/storage.h"

#include "core/error.h"
#include "tensor/block_cache.h"
#include "tensor/device/allocator.h"
#include "tensor/host_cache.h"

namespace ringlet::tensor {
namespace {

class CpuAllocator final : public Allocator {
 public:
  void* allocate(std::size_t bytes) override { return host_allocate(bytes); }
  void deallocate(void* ptr, std::size_t bytes) override { host_deallocate(ptr, bytes); }
  Device device() const override { return Device::cpu(); }
};

}  // namespace

Allocator& cpu_allocator() {
  static CpuAllocator allocator;
  return allocator;
}

Allocator& allocator_for(Device device) {
  if (device.is_cpu()) return cpu_allocator();
  return device_allocator(device);
}

BlockCacheStats device_memory_stats(Device device) {
  if (device.is_cpu()) return host_cache_stats();
  return device_allocator(device).stats();
}

void empty_device_cache(Device device) {
  if (device.is_cpu()) {
    empty_host_cache();
  } else {
    device_allocator(device).empty();
  }
}

Storage::Storage(std::size_t bytes, Allocator& allocator)
    : data_(allocator.allocate(bytes)), bytes_(bytes), allocator_(&allocator) {}

Storage::~Storage() { allocator_->deallocate(data_, bytes_); }

}  // namespace ringlet::tensor
