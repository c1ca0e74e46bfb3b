// CUDA tests: device tensors and kernels against the CPU. Without a GPU (or in a build
// without CUDA) the executable prints why and exits 77, which meson reports as SKIP — never
// as a pass.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "tensor/cuda/runtime.h"
#include "tensor/ops.h"
#include "tensor/storage.h"

using namespace ringlet;
using namespace ringlet::tensor;

TEST_CASE("tensor round-trips through device memory") {
  Generator gen(7);
  const Tensor host = randn({3, 5, 7}, gen);
  const Tensor device = host.to(Device::cuda(0));
  CHECK(device.device() == Device::cuda(0));
  CHECK(device.cpu().to_vector<float>() == host.to_vector<float>());
}

TEST_CASE("add_f32 kernel matches the CPU add") {
  Generator gen(8);
  const Tensor a = randn({1000}, gen), b = randn({1000}, gen);
  const Tensor da = a.to(Device::cuda(0)), db = b.to(Device::cuda(0));
  Tensor out = empty({1000}, DType::f32, Device::cuda(0));
  cuda::add_f32(static_cast<float*>(out.raw_data()), static_cast<const float*>(da.raw_data()),
                static_cast<const float*>(db.raw_data()), 1000, 0);
  CHECK(out.cpu().to_vector<float>() == add(a, b).to_vector<float>());  // exact: one rounding each
}

TEST_CASE("the caching allocator reuses freed device blocks and keeps statistics") {
  const Device gpu = Device::cuda(0);
  empty_device_cache(gpu);
  const BlockCacheStats start = device_memory_stats(gpu);
  const void* first = nullptr;
  {
    const Tensor a = empty({1024, 1024}, DType::f32, gpu);  // 4 MiB
    first = a.raw_data();
    CHECK(device_memory_stats(gpu).allocated_bytes == start.allocated_bytes + (4u << 20));
  }
  BlockCacheStats freed = device_memory_stats(gpu);
  CHECK(freed.cached_bytes == 4u << 20);
  CHECK(freed.reserved_bytes == start.reserved_bytes + (4u << 20));
  for (int step = 0; step < 10; ++step) {  // a training loop's same-size tensors
    const Tensor b = empty({1024, 1024}, DType::f32, gpu);
    CHECK(b.raw_data() == first);
  }
  const BlockCacheStats after = device_memory_stats(gpu);
  CHECK(after.hits == freed.hits + 10);
  CHECK(after.misses == freed.misses);  // no cudaMalloc in the loop
  CHECK(after.peak_allocated_bytes >= 4u << 20);
  empty_device_cache(gpu);
  CHECK(device_memory_stats(gpu).cached_bytes == 0);
}

int main(int argc, char** argv) {
  if (!cuda::built_with_cuda()) {
    std::puts("skipped: ringlet was built without CUDA");
    return 77;
  }
  if (cuda::device_count() == 0) {
    std::puts("skipped: no CUDA device");
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
