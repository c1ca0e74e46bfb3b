// Host allocator and Storage. CUDA storage goes through tensor/cuda/ (stubs without CUDA).
#include "tensor/storage.h"

#include "core/error.h"
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

class CudaAllocator final : public Allocator {
 public:
  explicit CudaAllocator(int index) : index_(index) {}
  void* allocate(std::size_t bytes) override {
    return bytes == 0 ? nullptr : cuda::device_malloc(bytes, index_);
  }
  void deallocate(void* ptr, std::size_t) override {
    if (ptr != nullptr) cuda::device_free(ptr, index_);
  }
  Device device() const override { return Device::cuda(index_); }

 private:
  int index_;
};

}  // namespace

Allocator& cpu_allocator() {
  static CpuAllocator allocator;
  return allocator;
}

Allocator& allocator_for(Device device) {
  if (device.is_cpu()) return cpu_allocator();
  const int count = cuda::device_count();  // throws NotBuiltError without CUDA
  RINGLET_CHECK(device.index >= 0 && device.index < count, DeviceError, "device ", device,
                " does not exist (", count, " CUDA devices visible)");
  static CudaAllocator allocators[16] = {
      CudaAllocator(0),  CudaAllocator(1),  CudaAllocator(2),  CudaAllocator(3),
      CudaAllocator(4),  CudaAllocator(5),  CudaAllocator(6),  CudaAllocator(7),
      CudaAllocator(8),  CudaAllocator(9),  CudaAllocator(10), CudaAllocator(11),
      CudaAllocator(12), CudaAllocator(13), CudaAllocator(14), CudaAllocator(15)};
  RINGLET_CHECK(device.index < 16, DeviceError, "device ", device, ": at most 16 supported");
  return allocators[device.index];
}

Storage::Storage(std::size_t bytes, Allocator& allocator)
    : data_(allocator.allocate(bytes)), bytes_(bytes), allocator_(&allocator) {}

Storage::~Storage() { allocator_->deallocate(data_, bytes_); }

}  // namespace ringlet::tensor
