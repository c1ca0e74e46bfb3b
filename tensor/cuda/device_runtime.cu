// device::Runtime over cudart. One object per GPU, created on first use and never destroyed.
// Host waits (stream and event synchronize) poll cudaStreamQuery / cudaEventQuery so that they
// honour the device deadline instead of blocking forever in the driver.
#include <cuda_runtime.h>

#include <chrono>
#include <functional>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "tensor/cuda/device_runtime.h"

namespace ringlet::tensor::cuda {
namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    RINGLET_THROW(DeviceError, "CUDA error in ", what, ": ", cudaGetErrorString(status));
}
#define RINGLET_CUDA_CHECK(call) check((call), #call)

// Polls `ready` (a query returning cudaSuccess when done, cudaErrorNotReady while running)
// until done or the device deadline passes.
template <class Query>
void poll_until_done(Query query, const char* what, int device) {
  const auto deadline = std::chrono::steady_clock::now() + device::wait_timeout();
  auto pause = std::chrono::microseconds(1);
  while (true) {
    const cudaError_t status = query();
    if (status == cudaSuccess) return;
    if (status != cudaErrorNotReady) check(status, what);
    if (std::chrono::steady_clock::now() > deadline) {
      RINGLET_THROW(TimeoutError, what, " on cuda:", device, " did not finish within ",
                    device::wait_timeout().count(), " ms (RINGLET_DEVICE_TIMEOUT)");
    }
    std::this_thread::sleep_for(pause);
    if (pause < std::chrono::microseconds(200)) pause *= 2;
  }
}

void CUDART_CB run_host_func(void* arg) {
  auto* fn = static_cast<std::function<void()>*>(arg);
  (*fn)();
  delete fn;
}

class CudaRuntime final : public device::Runtime {
 public:
  explicit CudaRuntime(int index) : index_(index) {
    select();
    RINGLET_CUDA_CHECK(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
    std::size_t free_bytes = 0;
    RINGLET_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &capacity_));
  }

  core::Device device() const override { return core::Device::cuda(index_); }
  void make_current() override { select(); }
  std::size_t memory_capacity() const override { return capacity_; }

  void* malloc(std::size_t bytes) override {
    select();
    void* ptr = nullptr;
    const cudaError_t status = cudaMalloc(&ptr, bytes);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // out of memory is an answer here, not a broken context
      return nullptr;
    }
    RINGLET_CUDA_CHECK(status);
    return ptr;
  }
  void free(void* ptr) override {
    select();
    RINGLET_CUDA_CHECK(cudaFree(ptr));
  }

  device::StreamHandle compute_stream() override { return compute_; }
  device::StreamHandle create_stream() override {
    select();
    cudaStream_t stream = nullptr;
    RINGLET_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    return stream;
  }
  void destroy_stream(device::StreamHandle stream) override {
    RINGLET_CUDA_CHECK(cudaStreamDestroy(as_stream(stream)));
  }
  void copy_async(void* dst, const void* src, std::size_t bytes,
                  device::StreamHandle stream) override {
    if (bytes == 0) return;
    select();
    RINGLET_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, as_stream(stream)));
  }
  void host_func(device::StreamHandle stream, std::function<void()> fn) override {
    auto* boxed = new std::function<void()>(std::move(fn));
    const cudaError_t status = cudaLaunchHostFunc(as_stream(stream), run_host_func, boxed);
    if (status != cudaSuccess) delete boxed;
    RINGLET_CUDA_CHECK(status);
  }
  void synchronize(device::StreamHandle stream) override {
    poll_until_done([s = as_stream(stream)] { return cudaStreamQuery(s); }, "stream synchronize",
                    index_);
  }

  device::EventHandle create_event() override {
    select();
    cudaEvent_t event = nullptr;
    RINGLET_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    return event;
  }
  void destroy_event(device::EventHandle event) override {
    RINGLET_CUDA_CHECK(cudaEventDestroy(as_event(event)));
  }
  void record(device::EventHandle event, device::StreamHandle stream) override {
    RINGLET_CUDA_CHECK(cudaEventRecord(as_event(event), as_stream(stream)));
  }
  void wait(device::StreamHandle stream, device::EventHandle event) override {
    RINGLET_CUDA_CHECK(cudaStreamWaitEvent(as_stream(stream), as_event(event), 0));
  }
  bool query(device::EventHandle event) override {
    const cudaError_t status = cudaEventQuery(as_event(event));
    if (status == cudaErrorNotReady) return false;
    RINGLET_CUDA_CHECK(status);
    return true;
  }
  void synchronize_event(device::EventHandle event) override {
    poll_until_done([e = as_event(event)] { return cudaEventQuery(e); }, "event synchronize",
                    index_);
  }

  void* host_alloc_pinned(std::size_t bytes) override {
    void* ptr = nullptr;
    RINGLET_CUDA_CHECK(cudaHostAlloc(&ptr, bytes == 0 ? 1 : bytes, cudaHostAllocPortable));
    return ptr;
  }
  void host_free_pinned(void* ptr) override { RINGLET_CUDA_CHECK(cudaFreeHost(ptr)); }

 private:
  static cudaStream_t as_stream(device::StreamHandle s) { return static_cast<cudaStream_t>(s); }
  static cudaEvent_t as_event(device::EventHandle e) { return static_cast<cudaEvent_t>(e); }
  void select() const { RINGLET_CUDA_CHECK(cudaSetDevice(index_)); }

  int index_;
  std::size_t capacity_ = 0;
  cudaStream_t compute_ = nullptr;
};

}  // namespace

device::Runtime& device_runtime(int index) {
  static std::once_flag once[16];
  static CudaRuntime* runtimes[16] = {};
  std::call_once(once[index], [index] { runtimes[index] = new CudaRuntime(index); });
  return *runtimes[index];
}

}  // namespace ringlet::tensor::cuda
