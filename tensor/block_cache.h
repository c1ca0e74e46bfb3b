// BlockCache: a caching allocator over a backend that hands out and takes back whole blocks
// (aligned_alloc / free for host memory, cudaMalloc / cudaFree for a device). A training step
// allocates and frees the same tensor sizes every iteration; the cache keeps freed blocks on
// free lists by size class so the next allocation of that class takes one back instead of
// going to the backend (a fresh mmap whose pages fault on first write, or a cudaMalloc that
// synchronizes the device).
// - Blocks of at least `min_cached` bytes are cached; smaller ones go straight to the backend
//   (the host's malloc already bins them; a device caches every size).
// - Size classes: a request is rounded up to the granule (64 B host, 512 B device), and from
//   `min_cached` on to one of sixteen classes per power of two (at most 1/16 more), so nearby
//   sizes (a last, shorter batch) share blocks.
// - The cache holds at most `limit` freed bytes; a block freed into a full cache pushes out
//   the least recently freed ones. empty() returns every cached block to the backend.
// - When the backend is out of memory (allocate returns nullptr), the cache releases what it
//   holds and tries once more, as PyTorch's CUDA allocator does; if that fails too, an
//   OutOfMemoryError (core/error.h) says what was asked for and what is allocated and cached.
// - Stats: allocated (in live blocks, by class size), its peak, cached, reserved (both: what
//   the backend has handed out), hits and misses.
// One mutex guards everything: a block is taken per tensor, not per element.
// Device blocks are reused in stream order: every block carries the tag of the stream it was
// allocated on, and a freed block serves only allocations with the same tag. A block freed
// while a kernel on that stream may still read it is then safe to hand out again, because the
// new tensor's kernels queue after it on the same stream. (Blocks used on other streams too
// come back only once those streams are past them: tensor/device/allocator.h.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>

namespace ringlet::tensor {

struct BlockCacheStats {
  std::uint64_t hits = 0;    // allocations served from the cache
  std::uint64_t misses = 0;  // cacheable allocations that went to the backend
  std::size_t allocated_bytes = 0;
  std::size_t peak_allocated_bytes = 0;
  std::size_t cached_bytes = 0;
  std::size_t reserved_bytes = 0;  // allocated + cached (filled in by stats())
  std::size_t limit_bytes = 0;
};

class BlockCache {
 public:
  struct Backend {
    std::function<void*(std::size_t)> allocate;  // nullptr when out of memory
    std::function<void(void*)> release;
    std::string name;  // "host", "cuda:0": for errors
  };

  BlockCache(Backend backend, std::size_t granule, std::size_t min_cached, std::size_t limit);
  ~BlockCache();
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;

  // The block size an allocation of `bytes` really gets.
  std::size_t size_class(std::size_t bytes) const;

  // `tag` names the stream (0 on the host): a freed block returns only to its own tag.
  void* allocate(std::size_t bytes, std::uintptr_t tag = 0);  // nullptr for 0 bytes
  void deallocate(void* ptr, std::size_t bytes, std::uintptr_t tag = 0);

  BlockCacheStats stats() const;
  void reset_peak();
  void set_limit(std::size_t bytes);  // cached blocks beyond it are released
  void empty();

 private:
  struct Block {
    std::size_t size;
    void* ptr;
    std::uintptr_t tag;
  };
  using Entry = std::list<Block>::iterator;
  struct ClassKey {
    std::size_t size;
    std::uintptr_t tag;
    bool operator==(const ClassKey&) const = default;
  };
  struct ClassKeyHash {
    std::size_t operator()(const ClassKey& k) const {
      return std::hash<std::size_t>()(k.size) ^ (std::hash<std::uintptr_t>()(k.tag) * 31);
    }
  };

  void* from_backend(std::size_t block, std::size_t asked);  // called with the mutex held
  void release_until(std::size_t target);                    // called with the mutex held

  Backend backend_;
  std::size_t granule_, min_cached_, limit_;
  mutable std::mutex mutex_;
  std::list<Block> lru_;  // cached blocks, least recently freed first
  std::unordered_map<ClassKey, std::deque<Entry>, ClassKeyHash> free_;  // oldest first
  BlockCacheStats stats_;
};

}  // namespace ringlet::tensor
