// BlockCache over a counting backend (what a device allocator does, without a device): reuse
// without backend calls, allocated / peak / cached / reserved, out of memory handled by
// releasing the cache and retrying, the error when even that fails, the limit and empty().
#include <doctest/doctest.h>

#include <cstdlib>
#include <set>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "tensor/block_cache.h"

using namespace ringlet;
using namespace ringlet::tensor;

namespace {

// A backend with a fixed capacity that records every call.
struct FakeDevice {
  explicit FakeDevice(std::size_t bytes) : capacity(bytes) {}
  std::size_t capacity;
  std::size_t used = 0;
  int allocs = 0, frees = 0;
  std::set<void*> live;
  std::unordered_map<void*, std::size_t> sizes;

  BlockCache::Backend backend() {
    return {.allocate = [this](std::size_t bytes) -> void* {
              if (used + bytes > capacity) return nullptr;
              void* p = std::malloc(bytes);
              used += bytes;
              ++allocs;
              live.insert(p);
              sizes[p] = bytes;
              return p;
            },
            .release =
                [this](void* p) {
                  REQUIRE(live.erase(p) == 1);  // never a block it did not hand out, never twice
                  used -= sizes[p];
                  ++frees;
                  std::free(p);
                },
            .name = "fake:0"};
  }
};

constexpr std::size_t kMiB = std::size_t{1} << 20;

}  // namespace

TEST_CASE("size classes: the granule below min_cached, sixteen per power of two above") {
  FakeDevice dev{1 << 30};
  BlockCache cache(dev.backend(), 512, 0, SIZE_MAX);
  CHECK(cache.size_class(1) == 512);
  CHECK(cache.size_class(512) == 512);
  CHECK(cache.size_class(513) == 1024);
  for (std::size_t bytes = 1; bytes < 256 * kMiB; bytes = bytes * 7 / 5 + 3) {
    const std::size_t block = cache.size_class(bytes);
    CHECK(block >= bytes);
    CHECK(block % 512 == 0);
    CHECK(block - bytes <= std::max<std::size_t>(bytes / 16, 511));
  }
}

TEST_CASE("a step's allocations are served from the cache after the first step") {
  FakeDevice dev{1 << 30};
  BlockCache cache(dev.backend(), 512, 0, SIZE_MAX);
  const std::size_t sizes[] = {4 * kMiB, 100, 3 * kMiB + 17, 100, 64 * 1024};
  std::size_t step_bytes = 0;
  for (std::size_t s : sizes) step_bytes += cache.size_class(s);
  for (int step = 0; step < 5; ++step) {
    std::vector<void*> blocks;
    for (std::size_t s : sizes) blocks.push_back(cache.allocate(s));
    CHECK(cache.stats().allocated_bytes == step_bytes);
    for (std::size_t i = 0; i < blocks.size(); ++i) cache.deallocate(blocks[i], sizes[i]);
  }
  CHECK(dev.allocs == 5);  // one backend call per block of the first step, none after
  CHECK(dev.frees == 0);
  const BlockCacheStats st = cache.stats();
  CHECK(st.misses == 5);
  CHECK(st.hits == 20);
  CHECK(st.allocated_bytes == 0);
  CHECK(st.peak_allocated_bytes == step_bytes);
  CHECK(st.cached_bytes == step_bytes);
  CHECK(st.reserved_bytes == step_bytes);
  CHECK(dev.used == step_bytes);
  cache.reset_peak();
  CHECK(cache.stats().peak_allocated_bytes == 0);
  cache.empty();
  CHECK(dev.frees == 5);
  CHECK(dev.used == 0);
  CHECK(cache.stats().reserved_bytes == 0);
  CHECK(cache.allocate(0) == nullptr);
}

TEST_CASE("out of memory: the cache gives its blocks back and tries again, then says why") {
  FakeDevice dev{10 * kMiB};
  BlockCache cache(dev.backend(), 512, 0, SIZE_MAX);
  void* a = cache.allocate(4 * kMiB);
  void* b = cache.allocate(4 * kMiB);
  cache.deallocate(a, 4 * kMiB);
  cache.deallocate(b, 4 * kMiB);
  CHECK(cache.stats().cached_bytes == 8 * kMiB);
  // 6 MiB does not fit next to 8 MiB cached: the cache releases them and the retry succeeds.
  void* c = cache.allocate(6 * kMiB);
  CHECK(c != nullptr);
  CHECK(cache.stats().cached_bytes == 0);
  CHECK(cache.stats().reserved_bytes == 6 * kMiB);
  CHECK(dev.frees == 2);
  // 5 MiB more cannot fit at all.
  try {
    cache.allocate(5 * kMiB);
    FAIL("expected OutOfMemoryError");
  } catch (const core::OutOfMemoryError& e) {
    const std::string what = e.what();
    CHECK(what.find("fake:0") != std::string::npos);
    CHECK(what.find("5242880 bytes") != std::string::npos);
    CHECK(what.find("6291456 bytes allocated") != std::string::npos);
  }
  CHECK(cache.stats().allocated_bytes == 6 * kMiB);  // the failure changed nothing
  cache.deallocate(c, 6 * kMiB);
}

TEST_CASE("the limit and min_cached decide what is kept") {
  FakeDevice dev{1 << 30};
  BlockCache cache(dev.backend(), 64, 128 * 1024, 3 * kMiB);
  void* small = cache.allocate(1000);
  cache.deallocate(small, 1000);
  CHECK(dev.frees == 1);  // below min_cached: straight back to the backend
  CHECK(cache.stats().cached_bytes == 0);
  void* a = cache.allocate(2 * kMiB);
  void* b = cache.allocate(2 * kMiB);
  cache.deallocate(a, 2 * kMiB);
  cache.deallocate(b, 2 * kMiB);  // only one 2 MiB block fits the 3 MiB limit
  CHECK(cache.stats().cached_bytes == 2 * kMiB);
  CHECK(cache.allocate(2 * kMiB) == b);  // the most recently freed one stayed
  cache.deallocate(b, 2 * kMiB);
  cache.set_limit(0);
  CHECK(cache.stats().cached_bytes == 0);
  CHECK(dev.used == 0);
}

TEST_CASE("a freed block returns only to allocations with its stream tag") {
  FakeDevice dev{1 << 30};
  BlockCache cache(dev.backend(), 512, 0, SIZE_MAX);
  void* a = cache.allocate(kMiB, /*tag=*/1);
  cache.deallocate(a, kMiB, 1);
  void* b = cache.allocate(kMiB, 2);  // another stream: a fresh block
  CHECK(b != a);
  void* c = cache.allocate(kMiB, 1);  // its own stream: the cached one
  CHECK(c == a);
  cache.deallocate(b, kMiB, 2);
  cache.deallocate(c, kMiB, 1);
  CHECK(cache.stats().cached_bytes == 2 * kMiB);
}
