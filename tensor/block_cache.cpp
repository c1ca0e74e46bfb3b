// BlockCache: free lists by size class plus one least-recently-freed order across classes.
#include "tensor/block_cache.h"

#include <algorithm>
#include <bit>
#include <iterator>

#include "core/error.h"

namespace ringlet::tensor {

BlockCache::BlockCache(Backend backend, std::size_t granule, std::size_t min_cached,
                       std::size_t limit)
    : backend_(std::move(backend)), granule_(granule), min_cached_(min_cached), limit_(limit) {
  stats_.limit_bytes = limit;
}

BlockCache::~BlockCache() { empty(); }

std::size_t BlockCache::size_class(std::size_t bytes) const {
  const auto round_up = [](std::size_t n, std::size_t step) {
    return (n + step - 1) / step * step;
  };
  if (bytes < min_cached_) return round_up(bytes, granule_);
  const std::size_t step = std::max(std::bit_floor(bytes) / 16, granule_);
  return round_up(bytes, step);
}

void* BlockCache::allocate(std::size_t bytes, std::uintptr_t tag) {
  if (bytes == 0) return nullptr;
  const std::size_t block = size_class(bytes);
  std::lock_guard lock(mutex_);
  void* ptr = nullptr;
  auto it = block >= min_cached_ ? free_.find({block, tag}) : free_.end();
  if (it != free_.end() && !it->second.empty()) {
    const Entry entry = it->second.back();  // the most recently freed: warmest in cache
    it->second.pop_back();
    ptr = entry->ptr;
    lru_.erase(entry);
    stats_.cached_bytes -= block;
    ++stats_.hits;
  } else {
    if (block >= min_cached_) ++stats_.misses;
    ptr = from_backend(block, bytes);
  }
  stats_.allocated_bytes += block;
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  return ptr;
}

void* BlockCache::from_backend(std::size_t block, std::size_t asked) {
  void* ptr = backend_.allocate(block);
  if (ptr == nullptr && stats_.cached_bytes > 0) {
    release_until(0);  // give the cached blocks back and try once more
    ptr = backend_.allocate(block);
  }
  if (ptr == nullptr) {
    RINGLET_THROW(OutOfMemoryError, backend_.name, ": out of memory allocating ", asked,
                  " bytes (a block of ", block, "; ", stats_.allocated_bytes,
                  " bytes allocated in tensors, ", stats_.cached_bytes, " cached)");
  }
  return ptr;
}

void BlockCache::deallocate(void* ptr, std::size_t bytes, std::uintptr_t tag) {
  if (ptr == nullptr) return;
  const std::size_t block = size_class(bytes);
  std::lock_guard lock(mutex_);
  stats_.allocated_bytes -= block;
  if (block >= min_cached_ && block <= limit_) {
    lru_.push_back({block, ptr, tag});
    free_[{block, tag}].push_back(std::prev(lru_.end()));
    stats_.cached_bytes += block;
    release_until(limit_);  // the least recently freed blocks make room
    return;
  }
  backend_.release(ptr);
}

// Frees the least recently freed blocks until at most `target` bytes remain, so sizes that
// stopped recurring (an evaluation's larger batch) give way to those in use every step.
void BlockCache::release_until(std::size_t target) {
  while (stats_.cached_bytes > target) {
    const Block oldest = lru_.front();
    free_[{oldest.size, oldest.tag}].pop_front();  // its oldest entry is this block
    lru_.pop_front();
    backend_.release(oldest.ptr);
    stats_.cached_bytes -= oldest.size;
  }
}

BlockCacheStats BlockCache::stats() const {
  std::lock_guard lock(mutex_);
  BlockCacheStats out = stats_;
  out.reserved_bytes = out.allocated_bytes + out.cached_bytes;  // all the backend handed out
  return out;
}

void BlockCache::reset_peak() {
  std::lock_guard lock(mutex_);
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
}

void BlockCache::set_limit(std::size_t bytes) {
  std::lock_guard lock(mutex_);
  limit_ = bytes;
  stats_.limit_bytes = bytes;
  release_until(limit_);
}

void BlockCache::empty() {
  std::lock_guard lock(mutex_);
  release_until(0);
}

}  // namespace ringlet::tensor
