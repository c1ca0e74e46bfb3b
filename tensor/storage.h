// Storage: one allocation of raw bytes on one device, shared by every view of it.
// An Allocator owns the policy: a BlockCache (block_cache.h) per device; for the host that of
// host_cache.h (64-byte aligned, blocks of 128 KiB and up cached), for a CUDA device one that
// caches every size.
// Storage is never resized; views keep it alive through shared_ptr.
#pragma once

#include <cstddef>
#include <memory>

#include "core/device.h"
#include "tensor/block_cache.h"

namespace ringlet::tensor {

using core::Device;

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void deallocate(void* ptr, std::size_t bytes) = 0;
  virtual Device device() const = 0;
};

Allocator& cpu_allocator();
Allocator& allocator_for(Device device);  // throws DeviceError / NotBuiltError when unavailable

// The statistics of a device's caching allocator (allocated, peak, cached, reserved), and
// empty_device_cache() to give its cached blocks back (torch.cuda.empty_cache()).
BlockCacheStats device_memory_stats(Device device);
void empty_device_cache(Device device);

class Storage {
 public:
  Storage(std::size_t bytes, Allocator& allocator);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  Device device() const { return allocator_->device(); }

 private:
  void* data_;
  std::size_t bytes_;
  Allocator* allocator_;
};

}  // namespace ringlet::tensor
