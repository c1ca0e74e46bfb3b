// The host cache: one process-wide BlockCache over aligned_alloc / free.
#include "tensor/host_cache.h"

#include <cstdlib>

#include "core/env.h"
#include "tensor/block_cache.h"

namespace ringlet::tensor {
namespace {

constexpr std::size_t kAlignment = 64;

// Never destroyed: tensors in static storage may be freed after any static destructor ran.
BlockCache& cache() {
  static BlockCache* instance = new BlockCache(
      {.allocate = [](std::size_t bytes) { return std::aligned_alloc(kAlignment, bytes); },
       .release = [](void* ptr) { std::free(ptr); },
       .name = "host"},
      kAlignment, kMinCachedBytes,
      static_cast<std::size_t>(
          core::env_int("RINGLET_HOST_CACHE_MB", 1024, 0, std::int64_t{1} << 20))
          << 20);
  return *instance;
}

}  // namespace

std::size_t host_size_class(std::size_t bytes) { return cache().size_class(bytes); }
void* host_allocate(std::size_t bytes) { return cache().allocate(bytes); }
void host_deallocate(void* ptr, std::size_t bytes) { cache().deallocate(ptr, bytes); }
HostCacheStats host_cache_stats() { return cache().stats(); }
void empty_host_cache() { cache().empty(); }
void set_host_cache_limit(std::size_t bytes) { cache().set_limit(bytes); }

}  // namespace ringlet::tensor
