// Storage: one allocation of raw bytes on one device, shared by every view of it.
// An Allocator owns the policy (host: 64-byte aligned blocks, large ones through the
// HostCache of host_cache.h; CUDA: the device allocator).
// Storage is never resized; views keep it alive through shared_ptr.
#pragma once

#include <cstddef>
#include <memory>

#include "core/device.h"

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
