// Storage: one allocation of raw bytes on one device, shared by every view of it.
// An Allocator owns the policy: a BlockCache (block_cache.h) per device; for the host that of
// host_cache.h (64-byte aligned, blocks of 128 KiB and up cached), for a device (cuda, emu)
// the stream-ordered one of tensor/device/allocator.h, which caches every size; pinned host
// memory has its own.
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
  // Page-locked host memory (device copies from it run asynchronously).
  virtual bool pinned() const { return false; }
  // The block is used on `stream` (a device stream handle) as well as the one it was
  // allocated on: freed, it waits until that stream is past it (tensor/device/allocator.h).
  virtual void record_stream(void* /*ptr*/, void* /*stream*/) {}
};

Allocator& cpu_allocator();
Allocator& allocator_for(Device device);  // throws DeviceError when the device does not exist

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
  bool pinned() const { return allocator_->pinned(); }
  void record_stream(void* stream) { allocator_->record_stream(data_, stream); }

 private:
  void* data_;
  std::size_t bytes_;
  Allocator* allocator_;
};

}  // namespace ringlet::tensor
