// The host block cache behind CPU tensors: a BlockCache (tensor/block_cache.h) over
// aligned_alloc, the CPU counterpart of a CUDA caching allocator. Without it each large block
// of a training step would be a fresh mmap whose pages fault on first write (about 3.5 ns per
// float written on this kind of machine, against 1 ns for a warm block).
// - Blocks of at least kMinCachedBytes are cached; smaller ones go straight to aligned_alloc,
//   whose malloc bins already reuse them.
// - Sixteen size classes per power of two; the least recently freed blocks leave a full cache.
// - The cache holds at most RINGLET_HOST_CACHE_MB freed megabytes (default 1024; 0 turns it
//   off). empty_host_cache() returns every cached block (as torch.cuda.empty_cache() does).
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/block_cache.h"

namespace ringlet::tensor {

using HostCacheStats = BlockCacheStats;

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
