// HostCache: a cache of freed large host blocks, the CPU counterpart of a CUDA caching
// allocator. A training step allocates and frees the same activation and gradient sizes
// every iteration; without a cache each large block is a fresh mmap whose pages fault on
// first write (about 3.5 ns per float written on this kind of machine, against 1 ns for a
// warm block). With it, a freed block goes to a per-size-class free list and the next
// allocation of that class takes it back, pages already mapped and often still in cache.
// - Blocks of at least kMinCachedBytes are cached; smaller ones go straight to malloc, whose
//   own bins already reuse them.
// - Size classes round a request up by at most 1/16 (sixteen classes per power of two), so
//   nearby sizes (a last, shorter batch) still share blocks.
// - The cache holds at most `limit` bytes (RINGLET_HOST_CACHE_MB, default 1024; 0 turns it
//   off). A block freed into a full cache pushes out the least recently freed ones, so sizes
//   that stopped recurring (an evaluation's larger batch) give way to those of every step.
// - empty() returns every cached block to the system (as torch.cuda.empty_cache() does).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ringlet::tensor {

struct HostCacheStats {
  std::uint64_t hits = 0;    // allocations served from the cache
  std::uint64_t misses = 0;  // cacheable allocations that went to the system
  std::size_t cached_bytes = 0;
  std::size_t limit_bytes = 0;
};

inline constexpr std::size_t kMinCachedBytes = std::size_t{128} << 10;

// The block size that an allocation of `bytes` really gets (its size class).
std::size_t host_size_class(std::size_t bytes);

// 64-byte aligned host memory through the process-wide cache.
void* host_allocate(std::size_t bytes);
void host_deallocate(void* ptr, std::size_t bytes);

HostCacheStats host_cache_stats();
void empty_host_cache();
// Changes the limit (bytes); cached blocks beyond it are released. For tests and tools.
void set_host_cache_limit(std::size_t bytes);

}  // namespace ringlet::tensor
