// The device kernels on the emulated GPU: KernelsImpl over an executor that queues each launch
// as one task on the stream's thread, which runs f(i) for every index (split over the
// kernel threads, core::parallel_for, when there are many), and GEMM as OpenBLAS there.
#include "core/threads.h"
#include "device/counters.h"
#include "device/emu/emu_runtime.h"
#include "tensor/cpu/blas.h"
#include "tensor/kernels/device_kernels_impl.h"

namespace ringlet::tensor::kernels {
namespace {

struct EmuExec {
  template <class F>
  static void launch(Stream stream, std::int64_t n, const F& f) {
    device::count_stream_ops(device::emu::queue(stream).device());
    device::emu::queue(stream).enqueue([f, n] {
      core::parallel_for(n, std::int64_t{1} << 15, [&f](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) f(i);
      });
    });
  }

  // OpenBLAS on the stream's thread, reading and writing the device's memory.
  template <class T>
  static void gemm(Stream stream, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n,
                   std::int64_t k, const T* a, std::int64_t lda, const T* b, std::int64_t ldb,
                   T beta, T* c, std::int64_t ldc) {
    device::count_stream_ops(device::emu::queue(stream).device());
    device::emu::queue(stream).enqueue(
        [=] { cpu::gemm(trans_a, trans_b, m, n, k, T(1), a, lda, b, ldb, beta, c, ldc); });
  }

  // One task (one stream operation) running the batch's GEMMs in order.
  template <class T>
  static void gemm_batched(Stream stream, bool trans_a, bool trans_b, std::int64_t m,
                           std::int64_t n, std::int64_t k, const T* a, std::int64_t lda,
                           std::int64_t stride_a, const T* b, std::int64_t ldb,
                           std::int64_t stride_b, T beta, T* c, std::int64_t ldc,
                           std::int64_t stride_c, std::int64_t batch) {
    device::count_stream_ops(device::emu::queue(stream).device());
    device::emu::queue(stream).enqueue([=] {
      for (std::int64_t i = 0; i < batch; ++i) {
        cpu::gemm(trans_a, trans_b, m, n, k, T(1), a + i * stride_a, lda, b + i * stride_b, ldb,
                  beta, c + i * stride_c, ldc);
      }
    });
  }
};

}  // namespace

DeviceKernels& emu_kernels() {
  static KernelsImpl<EmuExec> kernels;
  return kernels;
}

}  // namespace ringlet::tensor::kernels
