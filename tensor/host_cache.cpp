// HostCache: free lists of large host blocks by size class plus one least-recently-freed order
// across classes, under one mutex (a block is allocated per tensor, not per element, so the
// lock is cheap next to the memory traffic it saves).
#include "tensor/host_cache.h"

#include <bit>
#include <cstdlib>
#include <deque>
#include <iterator>
#include <list>
#include <mutex>
#include <unordered_map>

#include "core/env.h"
#include "core/error.h"

namespace ringlet::tensor {
namespace {

void* system_allocate(std::size_t bytes) {
  const std::size_t rounded = (bytes + 63) / 64 * 64;  // aligned_alloc wants a multiple
  void* ptr = std::aligned_alloc(64, rounded);
  if (ptr == nullptr) RINGLET_THROW(Error, "out of host memory allocating ", bytes, " bytes");
  return ptr;
}

class HostCache {
 public:
  HostCache()
      : limit_(static_cast<std::size_t>(
                   core::env_int("RINGLET_HOST_CACHE_MB", 1024, 0, std::int64_t{1} << 20))
               << 20) {}

  void* allocate(std::size_t bytes) {
    const std::size_t block = host_size_class(bytes);
    if (block < kMinCachedBytes) return system_allocate(bytes);
    {
      std::lock_guard lock(mutex_);
      auto it = free_.find(block);
      if (it != free_.end() && !it->second.empty()) {
        const auto entry = it->second.back();  // the most recently freed: warmest in cache
        it->second.pop_back();
        void* ptr = entry->ptr;
        lru_.erase(entry);
        cached_ -= block;
        ++hits_;
        return ptr;
      }
      ++misses_;
    }
    return system_allocate(block);
  }

  void deallocate(void* ptr, std::size_t bytes) {
    if (ptr == nullptr) return;
    const std::size_t block = host_size_class(bytes);
    if (block >= kMinCachedBytes) {
      std::lock_guard lock(mutex_);
      if (block <= limit_) {
        lru_.push_back({block, ptr});
        free_[block].push_back(std::prev(lru_.end()));
        cached_ += block;
        release_until(limit_);  // the least recently freed blocks make room
        return;
      }
    }
    std::free(ptr);
  }

  HostCacheStats stats() {
    std::lock_guard lock(mutex_);
    return {hits_, misses_, cached_, limit_};
  }

  void set_limit(std::size_t bytes) {
    std::lock_guard lock(mutex_);
    limit_ = bytes;
    release_until(limit_);
  }

  void empty() {
    std::lock_guard lock(mutex_);
    release_until(0);
  }

 private:
  struct Block {
    std::size_t size;
    void* ptr;
  };
  using Entry = std::list<Block>::iterator;

  // Frees the least recently freed blocks until at most `target` bytes remain, so sizes that
  // stopped recurring (an evaluation's larger batch) give way to those in use every step.
  // Called with the mutex held.
  void release_until(std::size_t target) {
    while (cached_ > target) {
      const Block oldest = lru_.front();
      auto& list = free_[oldest.size];  // its oldest entry is this block
      list.pop_front();
      lru_.pop_front();
      std::free(oldest.ptr);
      cached_ -= oldest.size;
    }
  }

  std::mutex mutex_;
  std::list<Block> lru_;  // cached blocks, least recently freed first
  std::unordered_map<std::size_t, std::deque<Entry>> free_;  // by size class, oldest first
  std::size_t cached_ = 0;
  std::size_t limit_;
  std::uint64_t hits_ = 0, misses_ = 0;
};

// Never destroyed: tensors in static storage may be freed after any static destructor ran.
HostCache& cache() {
  static HostCache* instance = new HostCache();
  return *instance;
}

}  // namespace

std::size_t host_size_class(std::size_t bytes) {
  if (bytes < kMinCachedBytes) return bytes;
  const std::size_t step = std::bit_floor(bytes) / 16;
  return (bytes + step - 1) / step * step;
}

void* host_allocate(std::size_t bytes) { return bytes == 0 ? nullptr : cache().allocate(bytes); }
void host_deallocate(void* ptr, std::size_t bytes) { cache().deallocate(ptr, bytes); }
HostCacheStats host_cache_stats() { return cache().stats(); }
void empty_host_cache() { cache().empty(); }
void set_host_cache_limit(std::size_t bytes) { cache().set_limit(bytes); }

}  // namespace ringlet::tensor
