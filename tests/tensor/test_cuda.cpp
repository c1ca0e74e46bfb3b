// CUDA tests: device tensors and kernels (tensor and collectives) against the CPU, including
// the device op suite the emulated device runs in every build (device_op_suite.h). Without a
// GPU (or in a build without CUDA) the executable prints why and exits 77, which meson reports
// as SKIP — never as a pass.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "collectives/cuda/reduce.h"
#include "collectives/reduce_kernels.h"
#include "core/cuda_plugin.h"
#include "core/dtype.h"
#include "device/cuda/device_runtime.h"
#include "device/runtime.h"
#include "device_op_suite.h"
#include "tensor/ops.h"
#include "tensor/storage.h"

using namespace ringlet;
using namespace ringlet::tensor;

core::Device suite::suite_device() { return core::Device::cuda(0); }
// CUDA's exp, log, tanh and pow are within a few ulp of glibc's, not bit for bit.
double suite::suite_tolerance() { return 1e-5; }

TEST_CASE("tensor round-trips through device memory") {
  Generator gen(7);
  const Tensor host = randn({3, 5, 7}, gen);
  const Tensor device = host.to(Device::cuda(0));
  CHECK(device.device() == Device::cuda(0));
  CHECK(device.cpu().to_vector<float>() == host.to_vector<float>());
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

namespace {

// `count` elements of `dtype` holding small integers from `seed` (exact in every dtype, and
// products of two stay exact), as raw bytes.
std::vector<char> small_integers(DType dtype, std::size_t count, int seed) {
  std::vector<char> bytes(count * core::dtype_size(dtype));
  for (std::size_t i = 0; i < count; ++i) {
    const double v = static_cast<double>(static_cast<int>((i * 7 + seed * 13) % 17) - 8);
    char* p = bytes.data() + i * core::dtype_size(dtype);
    switch (dtype) {
      case DType::f32: {
        const float f = static_cast<float>(v);
        std::memcpy(p, &f, 4);
        break;
      }
      case DType::f64: std::memcpy(p, &v, 8); break;
      case DType::f16: {
        const auto h = core::float_to_half(static_cast<float>(v));
        std::memcpy(p, &h, 2);
        break;
      }
      case DType::bf16: {
        const auto h = core::float_to_bf16(static_cast<float>(v));
        std::memcpy(p, &h, 2);
        break;
      }
      case DType::i32: {
        const auto x = static_cast<std::int32_t>(v);
        std::memcpy(p, &x, 4);
        break;
      }
      case DType::i64: {
        const auto x = static_cast<std::int64_t>(v);
        std::memcpy(p, &x, 8);
        break;
      }
      default: FAIL("no test data for ", dtype);
    }
  }
  return bytes;
}

// cuda:0's runtime, and blocking copies through its compute stream (where the kernels under test
// run too, so a copy back follows them).
device::Runtime& gpu() { return device::runtime(Device::cuda(0)); }

void* upload(const std::vector<char>& host) {
  void* d = gpu().malloc(host.size());
  REQUIRE(d != nullptr);
  gpu().copy_async(d, host.data(), host.size(), gpu().compute_stream());
  gpu().synchronize(gpu().compute_stream());
  return d;
}

std::vector<char> download(const void* d, std::size_t bytes) {
  std::vector<char> host(bytes);
  gpu().copy_async(host.data(), d, bytes, gpu().compute_stream());
  gpu().synchronize(gpu().compute_stream());
  return host;
}

}  // namespace

TEST_CASE("collective reduction kernels on device memory match the host kernels bit for bit") {
  using collectives::ReduceOp;
  const int dev = 0;
  for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64}) {
    const std::size_t es = core::dtype_size(dtype);
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max}) {
      // 4099: vectors and a tail; offset 1: unaligned buffers take the element-wise kernel
      for (std::size_t count : {std::size_t{1}, std::size_t{7}, std::size_t{4099}}) {
        for (std::size_t offset : {std::size_t{0}, std::size_t{1}}) {
          INFO(dtype, " ", collectives::reduce_op_name(op), " count ", count, " offset ", offset);
          const std::vector<char> a = small_integers(dtype, count + offset, 1);
          const std::vector<char> b = small_integers(dtype, count + offset, 2);
          std::vector<char> expected = a;
          collectives::reduce_into(expected.data() + offset * es, b.data() + offset * es, count,
                                   dtype, op);
          void* da = upload(a);
          void* db = upload(b);
          collectives::cuda::reduce_into(static_cast<char*>(da) + offset * es,
                                         static_cast<char*>(db) + offset * es, count, dtype, op,
                                         dev, gpu().compute_stream());
          const std::vector<char> got = download(da, a.size());  // after the kernel
          gpu().free(da);
          gpu().free(db);
          CHECK(std::memcmp(got.data(), expected.data(), got.size()) == 0);
        }
      }
    }
    std::vector<char> host = small_integers(dtype, 1001, 3);
    void* d = upload(host);
    collectives::cuda::divide_by(d, 1001, dtype, 3, dev, gpu().compute_stream());
    collectives::divide_by(host.data(), 1001, dtype, 3);
    const std::vector<char> got = download(d, host.size());
    gpu().free(d);
    INFO(dtype, " divide_by 3");
    CHECK(std::memcmp(got.data(), host.data(), got.size()) == 0);
  }
}

int main(int argc, char** argv) {
  if (!device::cuda::built_with_cuda()) {
    std::puts("skipped: ringlet was built without CUDA");
    return 77;
  }
  if (device::cuda::device_count() == 0) {
    const std::string& why = core::cuda_plugin_unavailable();
    std::printf("skipped: no CUDA device%s%s\n", why.empty() ? "" : ": ", why.c_str());
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
