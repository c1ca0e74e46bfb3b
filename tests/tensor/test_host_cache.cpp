// The host block cache behind CPU tensors: size classes, reuse, the limit and empty().
#include <doctest/doctest.h>

#include <cstdint>

#include "tensor/host_cache.h"
#include "tensor/ops.h"

using namespace ringlet;
using namespace ringlet::tensor;

TEST_CASE("size classes round large requests up by at most a sixteenth") {
  CHECK(host_size_class(100) == 128);  // small sizes: a multiple of the 64-byte alignment
  CHECK(host_size_class(kMinCachedBytes - 1) == kMinCachedBytes);
  CHECK(host_size_class(kMinCachedBytes) == kMinCachedBytes);
  std::size_t previous = 0;
  for (std::size_t bytes = kMinCachedBytes; bytes < (std::size_t{64} << 20);
       bytes = bytes * 9 / 7 + 13) {
    const std::size_t block = host_size_class(bytes);
    CHECK(block >= bytes);
    CHECK(block - bytes <= bytes / 16);
    CHECK(block % 64 == 0);
    CHECK(block >= previous);
    previous = block;
  }
  // A slightly shorter batch lands in the same class as the full one.
  CHECK(host_size_class(64 * 32 * 28 * 28 * 4) == host_size_class(63 * 32 * 28 * 28 * 4));
}

TEST_CASE("a freed large block is reused by the next allocation of its class") {
  empty_host_cache();
  const Shape shape{256, 1024};  // 1 MiB of f32
  const void* first = nullptr;
  {
    Tensor a = zeros(shape);
    first = a.raw_data();
    CHECK(reinterpret_cast<std::uintptr_t>(first) % 64 == 0);
  }
  const HostCacheStats after_free = host_cache_stats();
  CHECK(after_free.cached_bytes == host_size_class(256 * 1024 * 4));
  Tensor b = full(shape, 2.0);
  const HostCacheStats after_reuse = host_cache_stats();
  CHECK(b.raw_data() == first);
  CHECK(after_reuse.hits == after_free.hits + 1);
  CHECK(after_reuse.cached_bytes == 0);
  CHECK(sum(b).item() == doctest::Approx(2.0 * 256 * 1024));
  // Small tensors never enter the cache.
  { Tensor small = zeros({16}); }
  CHECK(host_cache_stats().cached_bytes == 0);
}

TEST_CASE("the limit bounds what the cache keeps, and empty() releases everything") {
  empty_host_cache();
  const std::size_t saved = host_cache_stats().limit_bytes;
  const std::size_t one = host_size_class(std::size_t{1} << 20);
  set_host_cache_limit(one);  // room for one 1 MiB block
  { Tensor a = zeros({256, 1024}), b = zeros({256, 1024}); }
  CHECK(host_cache_stats().cached_bytes == one);
  const std::uint64_t misses = host_cache_stats().misses;
  {
    Tensor a = zeros({256, 1024}), b = zeros({256, 1024});  // one from the cache, one new
  }
  CHECK(host_cache_stats().misses == misses + 1);
  set_host_cache_limit(0);
  CHECK(host_cache_stats().cached_bytes == 0);
  { Tensor c = zeros({256, 1024}); }
  CHECK(host_cache_stats().cached_bytes == 0);  // limit 0: the cache is off
  set_host_cache_limit(saved);
  { Tensor d = zeros({512, 1024}); }
  CHECK(host_cache_stats().cached_bytes > 0);
  empty_host_cache();
  CHECK(host_cache_stats().cached_bytes == 0);
}

TEST_CASE("a full cache gives way to the most recently freed sizes") {
  empty_host_cache();
  const std::size_t saved = host_cache_stats().limit_bytes;
  const std::size_t small = host_size_class(std::size_t{1} << 20);
  const std::size_t large = host_size_class(std::size_t{2} << 20);
  set_host_cache_limit(large);
  { Tensor a = zeros({256, 1024}); }  // 1 MiB, cached
  CHECK(host_cache_stats().cached_bytes == small);
  const void* block = nullptr;
  {
    Tensor b = zeros({512, 1024});  // 2 MiB: freeing it pushes the 1 MiB block out
    block = b.raw_data();
  }
  CHECK(host_cache_stats().cached_bytes == large);
  const HostCacheStats before = host_cache_stats();
  Tensor again = zeros({512, 1024});
  CHECK(again.raw_data() == block);
  CHECK(host_cache_stats().hits == before.hits + 1);
  Tensor other = zeros({256, 1024});
  CHECK(host_cache_stats().misses == before.misses + 1);
  set_host_cache_limit(saved);
}
