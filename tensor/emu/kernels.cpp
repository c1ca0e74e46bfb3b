// The device kernels on the emulated GPU: KernelsImpl over an executor that queues each launch
// as one task on the stream's thread, which runs f(i) for every index (split over the
// kernel threads, core::parallel_for, when there are many).
#include "core/threads.h"
#include "tensor/emu/emu_runtime.h"
#include "tensor/kernels/device_kernels_impl.h"

namespace ringlet::tensor::kernels {
namespace {

struct EmuExec {
  template <class F>
  static void launch(Stream stream, std::int64_t n, const F& f) {
    emu::queue(stream).enqueue([f, n] {
      core::parallel_for(n, std::int64_t{1} << 15, [&f](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) f(i);
      });
    });
  }
};

}  // namespace

DeviceKernels& emu_kernels() {
  static KernelsImpl<EmuExec> kernels;
  return kernels;
}

}  // namespace ringlet::tensor::kernels
