// Host allocator and Storage. CUDA storage goes through tensor/cuda/ (stubs without CUDA).
#include "tensor/storage.h"

#include "core/error.h"
#include "tensor/block_cache.h"
#include "tensor/cuda/runtime.h"
#include "tensor/host_cache.h"

namespace ringlet::tensor {
namespace {

class CpuAllocator final : public Allocator {
 public:
  void* allocate(std::size_t bytes) override { return host_allocate(bytes); }
  void deallocate(void* ptr, std::size_t bytes) override { host_deallocate(ptr, bytes); }
  Device device() const override { return Device::cpu(); }
};

// Device memory through a BlockCache per device: every size is cached (granule 512 bytes, as
// PyTorch's), with no limit but the device's own: out of memory, the cache gives its blocks
// back to the driver and tries once more.
class CudaAllocator final : public Allocator {
 public:
  explicit CudaAllocator(int index)
      : index_(index),
        // Never destroyed: freeing device memory after the CUDA runtime has shut down fails.
        cache_(new BlockCache(
            {.allocate = [index](std::size_t bytes) { return cuda::device_malloc(bytes, index); },
             .release = [index](void* ptr) { cuda::device_free(ptr, index); },
             .name = core::str("cuda:", index)},
            kDeviceGranule, 0, SIZE_MAX)) {}
  void* allocate(std::size_t bytes) override { return cache_->allocate(bytes); }
  void deallocate(void* ptr, std::size_t bytes) override { cache_->deallocate(ptr, bytes); }
  Device device() const override { return Device::cuda(index_); }
  BlockCache& cache() { return *cache_; }

 private:
  static constexpr std::size_t kDeviceGranule = 512;
  int index_;
  BlockCache* cache_;
};

CudaAllocator& cuda_allocator(Device device) {
  const int count = cuda::device_count();  // throws NotBuiltError without CUDA
  RINGLET_CHECK(device.is_cuda() && device.index >= 0 && device.index < count, DeviceError,
                "device ", device, " does not exist (", count, " CUDA devices visible)");
  static CudaAllocator allocators[16] = {
      CudaAllocator(0),  CudaAllocator(1),  CudaAllocator(2),  CudaAllocator(3),
      CudaAllocator(4),  CudaAllocator(5),  CudaAllocator(6),  CudaAllocator(7),
      CudaAllocator(8),  CudaAllocator(9),  CudaAllocator(10), CudaAllocator(11),
      CudaAllocator(12), CudaAllocator(13), CudaAllocator(14), CudaAllocator(15)};
  RINGLET_CHECK(device.index < 16, DeviceError, "device ", device, ": at most 16 supported");
  return allocators[device.index];
}

}  // namespace

Allocator& cpu_allocator() {
  static CpuAllocator allocator;
  return allocator;
}

Allocator& allocator_for(Device device) {
  if (device.is_cpu()) return cpu_allocator();
  return cuda_allocator(device);
}

BlockCacheStats device_memory_stats(Device device) {
  if (device.is_cpu()) return host_cache_stats();
  return cuda_allocator(device).cache().stats();
}

void empty_device_cache(Device device) {
  if (device.is_cpu()) {
    empty_host_cache();
  } else {
    cuda_allocator(device).cache().empty();
  }
}

Storage::Storage(std::size_t bytes, Allocator& allocator)
    : data_(allocator.allocate(bytes)), bytes_(bytes), allocator_(&allocator) {}

Storage::~Storage() { allocator_->deallocate(data_, bytes_); }

}  // namespace ringlet::tensor
