// device::Runtime over cudart. One object per GPU, created on first use and never destroyed.
// Host waits (stream and event synchronize) poll cudaStreamQuery / cudaEventQuery so that they
// honour the device deadline instead of blocking forever in the driver.
#include <cuda.h>  // the driver's types for its stream memory operations (no -lcuda)
#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "core/cuda_plugin.h"
#include "core/error.h"
#include "device/counters.h"
#include "device/cuda/device_runtime.h"
#include "device/op_context.h"

namespace ringlet::device::cuda {
namespace {

// A failed call also clears the thread's last error (for errors that are not sticky): the error
// is reported here, once, and not again by the next kernel launch's cudaGetLastError check.
void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    cudaGetLastError();
    RINGLET_THROW(DeviceError, "CUDA error in ", what, ": ", cudaGetErrorString(status));
  }
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

// A host function and the runtime's slot for its failure: CUDA cannot fail a stream from a
// host function, so the first exception is kept and thrown by the next synchronize.
struct HostFunc {
  std::function<void()> fn;
  std::mutex* mutex;
  std::exception_ptr* failure;
};

void CUDART_CB run_host_func(void* arg) {
  auto* call = static_cast<HostFunc*>(arg);
  try {
    call->fn();
  } catch (...) {
    std::lock_guard lock(*call->mutex);
    if (!*call->failure) *call->failure = std::current_exception();
  }
  delete call;
}

std::string to_hex(const void* data, std::size_t bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < bytes; ++i) {
    const auto b = static_cast<const unsigned char*>(data)[i];
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

bool from_hex(const std::string& text, void* data, std::size_t bytes) {
  if (text.size() != 2 * bytes) return false;
  const auto nibble = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  for (std::size_t i = 0; i < bytes; ++i) {
    const int hi = nibble(text[2 * i]), lo = nibble(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    static_cast<unsigned char*>(data)[i] = static_cast<unsigned char>(hi * 16 + lo);
  }
  return true;
}

// The driver's stream memory operations, found through the runtime (the driver library is
// never linked): null where the driver has none.
struct StreamMemoryOps {
  using Write = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
  using Wait = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
  Write write = nullptr;
  Wait wait = nullptr;
};

const StreamMemoryOps& stream_memory_ops_entry_points() {
  static const StreamMemoryOps ops = [] {
    StreamMemoryOps found;
    void* write = nullptr;
    void* wait = nullptr;
    cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuStreamWriteValue32", &write, 11070, cudaEnableDefault,
                                         &status) == cudaSuccess &&
        status == cudaDriverEntryPointSuccess &&
        cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &wait, 11070, cudaEnableDefault,
                                         &status) == cudaSuccess &&
        status == cudaDriverEntryPointSuccess) {
      found.write = reinterpret_cast<StreamMemoryOps::Write>(write);
      found.wait = reinterpret_cast<StreamMemoryOps::Wait>(wait);
    }
    cudaGetLastError();
    return found;
  }();
  return ops;
}

// The flag kernels where the driver has no stream memory operations: one thread each. The wait
// spins (with pauses), so it may only wait for a flag that a kernel resident at the same time
// sets: ranks that are threads of one process.
__global__ void write_flag_kernel(unsigned int* addr, unsigned int value) {
  __threadfence_system();
  *reinterpret_cast<volatile unsigned int*>(addr) = value;
}

__global__ void wait_flag_kernel(const unsigned int* addr, unsigned int value) {
  while (*reinterpret_cast<const volatile unsigned int*>(addr) != value) __nanosleep(256);
  __threadfence_system();
}

class CudaRuntime final : public device::Runtime {
 public:
  explicit CudaRuntime(int index) : index_(index) {
    select();
    RINGLET_CUDA_CHECK(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
    std::size_t free_bytes = 0;
    RINGLET_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &capacity_));
    // Mapped pinned memory: with unified addressing kernels write it at the host's address.
    RINGLET_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&error_words_),
                                     2 * sizeof(std::uint64_t),
                                     cudaHostAllocPortable | cudaHostAllocMapped));
    error_words_[0] = error_words_[1] = 0;
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
    device::count_driver_alloc(device());
    return ptr;
  }
  void free(void* ptr) override {
    select();
    device::count_host_sync(device());  // cudaFree waits for the device
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
    device::count_stream_ops(device());
    RINGLET_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, as_stream(stream)));
  }
  void host_func(device::StreamHandle stream, std::function<void()> fn) override {
    if (stream_capturing(stream)) {
      refuse_in_capture(
          "a host function (an upload from pageable host memory, or a callback "
          "on the stream)");
    }
    device::count_stream_ops(device());
    auto* boxed = new HostFunc{std::move(fn), &failure_mutex_, &failure_};
    const cudaError_t status = cudaLaunchHostFunc(as_stream(stream), run_host_func, boxed);
    if (status != cudaSuccess) delete boxed;
    RINGLET_CUDA_CHECK(status);
  }
  bool host_functions_may_block() const override { return false; }
  void synchronize(device::StreamHandle stream) override {
    if (stream_capturing(stream)) {
      refuse_in_capture(
          "a wait of the host for the stream (a host read: item(), cpu(), "
          "to_vector)");
    }
    device::count_host_sync(device());
    poll_until_done([s = as_stream(stream)] { return cudaStreamQuery(s); }, "stream synchronize",
                    index_);
    std::lock_guard lock(failure_mutex_);
    if (failure_) std::rethrow_exception(failure_);
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
    if (capturing()) refuse_in_capture("a wait of the host for an event");
    device::count_host_sync(device());
    poll_until_done([e = as_event(event)] { return cudaEventQuery(e); }, "event synchronize",
                    index_);
  }

  void* host_alloc_pinned(std::size_t bytes) override {
    device::count_driver_alloc(device());
    void* ptr = nullptr;
    RINGLET_CUDA_CHECK(
        cudaHostAlloc(&ptr, bytes == 0 ? 1 : bytes, cudaHostAllocPortable | cudaHostAllocMapped));
    return ptr;
  }
  void host_free_pinned(void* ptr) override { RINGLET_CUDA_CHECK(cudaFreeHost(ptr)); }
  void* error_words() override { return error_words_; }

  void begin_capture(device::StreamHandle stream) override {
    select();
    RINGLET_CUDA_CHECK(cudaStreamBeginCapture(as_stream(stream), cudaStreamCaptureModeThreadLocal));
    ++captures_;
  }
  device::GraphHandle end_capture(device::StreamHandle stream) override {
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(as_stream(stream), &graph);
    --captures_;
    RINGLET_CUDA_CHECK(ended);
    cudaGraphExec_t exec = nullptr;
    const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    RINGLET_CUDA_CHECK(made);
    return exec;
  }
  void launch_graph(device::GraphHandle graph, device::StreamHandle stream) override {
    select();
    device::count_stream_ops(device());
    RINGLET_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), as_stream(stream)));
  }
  void destroy_graph(device::GraphHandle graph) override {
    RINGLET_CUDA_CHECK(cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph)));
  }
  bool capturing() const override { return captures_.load() > 0; }
  bool is_capturing(device::StreamHandle stream) override { return stream_capturing(stream); }

  void write_value32(void* addr, std::uint32_t value, device::StreamHandle stream) override {
    select();
    device::count_stream_ops(device());
    if (const auto& ops = stream_memory_ops_entry_points(); ops.write != nullptr) {
      check_driver(ops.write(static_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(addr),
                             value, CU_STREAM_WRITE_VALUE_DEFAULT),
                   "cuStreamWriteValue32");
      return;
    }
    write_flag_kernel<<<1, 1, 0, as_stream(stream)>>>(static_cast<unsigned int*>(addr), value);
    RINGLET_CUDA_CHECK(cudaGetLastError());
  }
  void wait_value32(void* addr, std::uint32_t value, device::StreamHandle stream) override {
    select();
    device::count_stream_ops(device());
    if (const auto& ops = stream_memory_ops_entry_points(); ops.wait != nullptr) {
      check_driver(ops.wait(static_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(addr),
                            value, CU_STREAM_WAIT_VALUE_EQ),
                   "cuStreamWaitValue32");
      return;
    }
    wait_flag_kernel<<<1, 1, 0, as_stream(stream)>>>(static_cast<const unsigned int*>(addr), value);
    RINGLET_CUDA_CHECK(cudaGetLastError());
  }
  bool stream_memory_ops() override { return stream_memory_ops_entry_points().wait != nullptr; }

  std::string ipc_export(void* ptr) override {
    select();
    cudaIpcMemHandle_t handle;
    RINGLET_CUDA_CHECK(cudaIpcGetMemHandle(&handle, ptr));
    return to_hex(&handle, sizeof handle);
  }
  void* ipc_open(const std::string& text) override {
    cudaIpcMemHandle_t handle;
    RINGLET_CHECK(from_hex(text, &handle, sizeof handle), DeviceError, "cuda:", index_,
                  ": not a CUDA IPC handle");
    select();
    void* ptr = nullptr;
    RINGLET_CUDA_CHECK(cudaIpcOpenMemHandle(&ptr, handle, cudaIpcMemLazyEnablePeerAccess));
    return ptr;
  }
  void ipc_close(void* ptr) override {
    select();
    RINGLET_CUDA_CHECK(cudaIpcCloseMemHandle(ptr));
  }

 private:
  static cudaStream_t as_stream(device::StreamHandle s) { return static_cast<cudaStream_t>(s); }
  static bool stream_capturing(device::StreamHandle s) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    RINGLET_CUDA_CHECK(cudaStreamIsCapturing(as_stream(s), &status));
    return status != cudaStreamCaptureStatusNone;
  }
  [[noreturn]] void refuse_in_capture(const std::string& what) const {
    RINGLET_THROW(CaptureError, "cuda:", index_, ": ", what, " cannot be captured into a graph ",
                  "(while capturing, in ", device::current_op(), ")");
  }
  static cudaEvent_t as_event(device::EventHandle e) { return static_cast<cudaEvent_t>(e); }
  static void check_driver(CUresult status, const char* what) {
    RINGLET_CHECK(status == CUDA_SUCCESS, DeviceError, "CUDA driver error ",
                  static_cast<int>(status), " in ", what);
  }
  // The device is set once per thread, not per call: cudaGetDevice reads the runtime's
  // thread-local state, and cudaSetDevice runs only when another device is current.
  void select() const {
    int current = -1;
    RINGLET_CUDA_CHECK(cudaGetDevice(&current));
    if (current != index_) RINGLET_CUDA_CHECK(cudaSetDevice(index_));
  }

  int index_;
  std::size_t capacity_ = 0;
  cudaStream_t compute_ = nullptr;
  std::uint64_t* error_words_ = nullptr;  // never freed: the runtime lives as long as the process
  std::atomic<int> captures_{0};          // streams capturing now
  std::mutex failure_mutex_;
  std::exception_ptr failure_;  // a host function's, sticky as a kernel's failure
};

}  // namespace

bool built_with_cuda() { return true; }

int device_count() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaErrorNoDevice || status == cudaErrorInsufficientDriver) {
    cudaGetLastError();  // clear the sticky error: no GPU is an answer here
    return 0;
  }
  check(status, "cudaGetDeviceCount");
  return count;
}

device::Runtime& device_runtime(int index) {
  static std::once_flag once[16];
  static CudaRuntime* runtimes[16] = {};
  std::call_once(once[index], [index] { runtimes[index] = new CudaRuntime(index); });
  return *runtimes[index];
}

}  // namespace ringlet::device::cuda

// The plugin's entry points (core/cuda_plugin.h); device/cuda/plugin_calls.cpp calls them.
RINGLET_CUDA_PLUGIN_EXPORT int ringlet_cuda_device_count() {
  return ringlet::device::cuda::device_count();
}
RINGLET_CUDA_PLUGIN_EXPORT ringlet::device::Runtime* ringlet_cuda_device_runtime(int index) {
  return &ringlet::device::cuda::device_runtime(index);
}
