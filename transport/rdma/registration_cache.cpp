#include "transport/rdma/registration_cache.h"

#include "core/error.h"

namespace ringlet::transport::rdma {

void RegistrationCache::add(const void* data, std::size_t bytes) {
  RINGLET_CHECK(data != nullptr && bytes > 0, ValueError, "rdma: registering an empty buffer");
  const auto start = reinterpret_cast<std::uintptr_t>(data);
  std::lock_guard lock(mutex_);
  const auto next = regions_.lower_bound(start);
  const bool overlaps_next = next != regions_.end() && next->first < start + bytes;
  const bool overlaps_previous = next != regions_.begin() && [&] {
    const auto previous = std::prev(next);
    return previous->first + previous->second->bytes() > start;
  }();
  RINGLET_CHECK(!overlaps_next && !overlaps_previous, ValueError, "rdma: buffer ", data, " (",
                bytes, " bytes) overlaps one already registered");
  regions_[start] = context_.register_memory(const_cast<void*>(data), bytes, false);
}

void RegistrationCache::remove(const void* data) {
  std::lock_guard lock(mutex_);
  const auto erased = regions_.erase(reinterpret_cast<std::uintptr_t>(data));
  RINGLET_CHECK(erased == 1, ValueError, "rdma: buffer ", data, " is not registered");
}

std::shared_ptr<const MemoryRegion> RegistrationCache::find(const void* data,
                                                            std::size_t bytes) const {
  const auto start = reinterpret_cast<std::uintptr_t>(data);
  std::lock_guard lock(mutex_);
  auto it = regions_.upper_bound(start);
  if (it == regions_.begin()) return nullptr;
  --it;
  const std::size_t offset = start - it->first;
  const std::size_t size = it->second->bytes();
  if (offset > size || bytes > size - offset) return nullptr;
  return it->second;
}

}  // namespace ringlet::transport::rdma
