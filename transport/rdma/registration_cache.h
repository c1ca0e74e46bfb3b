// RegistrationCache: caller buffers registered with the device, so that sends from them go
// straight to the wire (zero copy) instead of through a bounce slot. Registration pins memory
// and costs a system call, so it is explicit (add / remove, e.g. for DDP's bucket memory);
// a send looks its buffer up here and falls back to copying when it is not registered.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "transport/rdma/verbs.h"

namespace ringlet::transport::rdma {

class RegistrationCache {
 public:
  explicit RegistrationCache(Context& context) : context_(context) {}

  // Registers [data, data + bytes) for local reads until remove(data). Registering a range
  // that overlaps one already registered is a ValueError.
  void add(const void* data, std::size_t bytes);
  void remove(const void* data);
  // The registered region holding all of [data, data + bytes), or null. A send holds it until
  // its writes completed, so remove() cannot deregister memory a write is still reading.
  std::shared_ptr<const MemoryRegion> find(const void* data, std::size_t bytes) const;

 private:
  Context& context_;
  mutable std::mutex mutex_;
  std::map<std::uintptr_t, std::shared_ptr<const MemoryRegion>> regions_;  // by start address
};

}  // namespace ringlet::transport::rdma
