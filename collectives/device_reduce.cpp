// The two tables: the emulated device's (host kernels as stream tasks) and CUDA's (kernels).
#include "collectives/device_reduce.h"

#include <cstdint>
#include <vector>

#include "collectives/cuda/reduce.h"
#include "collectives/reduce_kernels.h"
#include "core/error.h"
#include "device/counters.h"
#include "device/emu/emu_runtime.h"
#include "device/emu/reachable.h"

namespace ringlet::collectives {
namespace {

void check_op(ReduceOp op) {
  RINGLET_CHECK(op != ReduceOp::avg, ValueError,
                "a device reduction of avg: reduce with sum, then divide_by");
}

void emu_reduce_many(void* dst, const void* const* srcs, int sources, std::size_t count,
                     DType dtype, ReduceOp op, core::Device device, device::StreamHandle stream) {
  check_op(op);
  const std::size_t bytes = count * core::dtype_size(dtype);
  device::emu::check_reachable(device, dst, bytes, "a reduction's output");
  for (int s = 0; s < sources; ++s)
    device::emu::check_reachable(device, srcs[s], bytes, "a reduction's input");
  device::count_stream_ops(device);
  device::emu::queue(stream).enqueue(
      [dst, list = std::vector<const void*>(srcs, srcs + sources), count, dtype, op] {
        reduce_many(dst, list.data(), static_cast<int>(list.size()), count, dtype, op);
      });
}

void emu_divide_by(void* data, std::size_t count, DType dtype, int divisor, core::Device device,
                   device::StreamHandle stream) {
  device::emu::check_reachable(device, data, count * core::dtype_size(dtype), "a division's data");
  device::count_stream_ops(device);
  device::emu::queue(stream).enqueue([=] { divide_by(data, count, dtype, divisor); });
}

void cuda_reduce_many(void* dst, const void* const* srcs, int sources, std::size_t count,
                      DType dtype, ReduceOp op, core::Device device, device::StreamHandle stream) {
  check_op(op);
  const int launches =
      cuda::reduce_many(dst, srcs, sources, count, dtype, op, device.index, stream);
  device::count_stream_ops(device, static_cast<std::uint64_t>(launches));
}

void cuda_divide_by(void* data, std::size_t count, DType dtype, int divisor, core::Device device,
                    device::StreamHandle stream) {
  device::count_stream_ops(device);
  cuda::divide_by(data, count, dtype, divisor, device.index, stream);
}

constexpr DeviceReduce kEmu{emu_reduce_many, emu_divide_by};
constexpr DeviceReduce kCuda{cuda_reduce_many, cuda_divide_by};

}  // namespace

const DeviceReduce& device_reduce(core::Device device) {
  RINGLET_CHECK(!device.is_cpu(), ValueError, "device reductions need a device, not the host");
  return device.is_cuda() ? kCuda : kEmu;
}

}  // namespace ringlet::collectives
