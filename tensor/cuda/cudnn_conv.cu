// cuDNN's legacy convolution API through function pointers taken from the library at run time;
// per shape one plan (descriptors, and each pass's algorithm and workspace), searched with
// cudnnFind*AlgorithmEx the first time the shape runs outside a capture.
#include <cuda_runtime.h>
#include <cudnn.h>
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "core/cuda_plugin.h"
#include "core/error.h"
#include "tensor/cuda/cudnn_conv.h"

namespace ringlet::tensor::cuda {
namespace {

// clang-format off: one function a line
#define RINGLET_CUDNN_FUNCTIONS(X)                 \
  X(cudnnGetErrorString)                           \
  X(cudnnCreate)                                   \
  X(cudnnSetStream)                                \
  X(cudnnCreateTensorDescriptor)                   \
  X(cudnnSetTensor4dDescriptor)                    \
  X(cudnnCreateFilterDescriptor)                   \
  X(cudnnSetFilter4dDescriptor)                    \
  X(cudnnCreateConvolutionDescriptor)              \
  X(cudnnSetConvolution2dDescriptor)               \
  X(cudnnSetConvolutionMathType)                   \
  X(cudnnFindConvolutionForwardAlgorithmEx)        \
  X(cudnnFindConvolutionBackwardDataAlgorithmEx)   \
  X(cudnnFindConvolutionBackwardFilterAlgorithmEx) \
  X(cudnnGetConvolutionForwardAlgorithm_v7)        \
  X(cudnnGetConvolutionBackwardDataAlgorithm_v7)   \
  X(cudnnGetConvolutionBackwardFilterAlgorithm_v7) \
  X(cudnnConvolutionForward)                       \
  X(cudnnConvolutionBackwardData)                  \
  X(cudnnConvolutionBackwardFilter)
// clang-format on

// The library's functions, or why they could not be had.
struct Api {
#define RINGLET_CUDNN_POINTER(name) decltype(&::name) name = nullptr;
  RINGLET_CUDNN_FUNCTIONS(RINGLET_CUDNN_POINTER)
#undef RINGLET_CUDNN_POINTER
  std::string missing;  // "" when every function was found
};

Api load() {
  Api api;
  const char* flag = std::getenv("RINGLET_CUDNN");
  if (flag != nullptr && std::strcmp(flag, "0") == 0) {
    api.missing = "RINGLET_CUDNN=0";
    return api;
  }
  void* lib = nullptr;
  for (const char* name : {"libcudnn.so.9", "libcudnn.so"}) {
    if ((lib = ::dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
  }
  if (lib == nullptr) {
    const char* error = ::dlerror();
    api.missing = std::string("libcudnn.so.9 could not be loaded: ") + (error ? error : "?");
    return api;
  }
#define RINGLET_CUDNN_LOOKUP(name)                                     \
  api.name = reinterpret_cast<decltype(&::name)>(::dlsym(lib, #name)); \
  if (api.name == nullptr && api.missing.empty()) api.missing = "libcudnn has no " #name;
  RINGLET_CUDNN_FUNCTIONS(RINGLET_CUDNN_LOOKUP)
#undef RINGLET_CUDNN_LOOKUP
  return api;
}

const Api& api() {
  static const Api loaded = load();
  return loaded;
}

void check(cudnnStatus_t status, const char* what) {
  if (status != CUDNN_STATUS_SUCCESS) {
    RINGLET_THROW(DeviceError, "cuDNN ", what, " failed: ", api().cudnnGetErrorString(status));
  }
}

bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing(stream, &status) == cudaSuccess &&
         status != cudaStreamCaptureStatusNone;
}

// One pass's choice.
struct Choice {
  int algo = 0;
  std::size_t workspace = 0;
  bool searched = false;  // by cudnnFind*Ex (else cuDNN's heuristic, to be searched later)
};

// A shape's descriptors and choices (one convolution descriptor per pass: each carries the
// math type its algorithm wants).
struct Plan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv[3] = {nullptr, nullptr, nullptr};
  Choice choice[3];
};
enum Pass { kForward = 0, kData = 1, kFilter = 2 };

constexpr std::size_t kSearchWorkspace = std::size_t{64} << 20;
constexpr int kAlgos = 8;

std::mutex& mutex() {
  static std::mutex m;
  return m;
}

cudnnHandle_t handle(int device) {  // with mutex() held
  static cudnnHandle_t handles[16] = {};
  if (handles[device] == nullptr) {
    cudaSetDevice(device);
    check(api().cudnnCreate(&handles[device]), "cudnnCreate");
  }
  return handles[device];
}

Plan& plan_for(const CudnnShape& s) {  // with mutex() held
  static std::vector<std::pair<CudnnShape, std::unique_ptr<Plan>>> plans;
  for (auto& [shape, plan] : plans) {
    if (shape == s) return *plan;
  }
  auto p = std::make_unique<Plan>();
  const Api& a = api();
  check(a.cudnnCreateTensorDescriptor(&p->x), "tensor descriptor");
  check(a.cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.n, s.c, s.h, s.w),
        "tensor descriptor");
  check(a.cudnnCreateTensorDescriptor(&p->y), "tensor descriptor");
  check(a.cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.n, s.o, s.out_h,
                                     s.out_w),
        "tensor descriptor");
  check(a.cudnnCreateFilterDescriptor(&p->w), "filter descriptor");
  check(
      a.cudnnSetFilter4dDescriptor(p->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, s.o, s.c, s.kh, s.kw),
      "filter descriptor");
  const cudnnMathType_t math = s.tensor_cores ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
  for (cudnnConvolutionDescriptor_t& conv : p->conv) {
    check(a.cudnnCreateConvolutionDescriptor(&conv), "convolution descriptor");
    check(a.cudnnSetConvolution2dDescriptor(conv, s.pad_h, s.pad_w, s.stride_h, s.stride_w,
                                            s.dilation_h, s.dilation_w, CUDNN_CROSS_CORRELATION,
                                            CUDNN_DATA_FLOAT),
          "convolution descriptor");
    check(a.cudnnSetConvolutionMathType(conv, math), "math type");
  }
  plans.emplace_back(s, std::move(p));
  return *plans.back().second;
}

// The first successful result of a search or heuristic (its algorithm, workspace, math type).
template <class Perf>
Choice first_success(const Perf* perf, int count, cudnnConvolutionDescriptor_t conv, bool searched,
                     const char* what) {
  for (int i = 0; i < count; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
    check(api().cudnnSetConvolutionMathType(conv, perf[i].mathType), "math type");
    return Choice{static_cast<int>(perf[i].algo), perf[i].memory, searched};
  }
  RINGLET_THROW(DeviceError, "cuDNN found no algorithm for the ", what, " of this convolution");
}

}  // namespace

const std::string& cudnn_unavailable() { return api().missing; }

void cudnn_forward(const CudnnShape& s, const void* x, const void* w, void* y, void* stream,
                   int device, const Workspace& workspace) {
  std::lock_guard lock(mutex());
  const Api& a = api();
  cudnnHandle_t h = handle(device);
  const auto st = static_cast<cudaStream_t>(stream);
  check(a.cudnnSetStream(h, st), "cudnnSetStream");
  Plan& p = plan_for(s);
  Choice& c = p.choice[kForward];
  if (!c.searched) {
    cudnnConvolutionFwdAlgoPerf_t perf[kAlgos];
    int found = 0;
    if (capturing(st)) {
      check(a.cudnnGetConvolutionForwardAlgorithm_v7(h, p.x, p.w, p.conv[kForward], p.y, kAlgos,
                                                     &found, perf),
            "forward heuristic");
      c = first_success(perf, found, p.conv[kForward], false, "forward");
    } else {
      check(a.cudnnFindConvolutionForwardAlgorithmEx(h, p.x, x, p.w, w, p.conv[kForward], p.y, y,
                                                     kAlgos, &found, perf,
                                                     workspace(kSearchWorkspace), kSearchWorkspace),
            "forward search");
      c = first_success(perf, found, p.conv[kForward], true, "forward");
    }
  }
  const float one = 1, zero = 0;
  check(a.cudnnConvolutionForward(h, &one, p.x, x, p.w, w, p.conv[kForward],
                                  static_cast<cudnnConvolutionFwdAlgo_t>(c.algo),
                                  workspace(c.workspace), c.workspace, &zero, p.y, y),
        "cudnnConvolutionForward");
}

void cudnn_backward_data(const CudnnShape& s, const void* w, const void* dy, void* dx, void* stream,
                         int device, const Workspace& workspace) {
  std::lock_guard lock(mutex());
  const Api& a = api();
  cudnnHandle_t h = handle(device);
  const auto st = static_cast<cudaStream_t>(stream);
  check(a.cudnnSetStream(h, st), "cudnnSetStream");
  Plan& p = plan_for(s);
  Choice& c = p.choice[kData];
  if (!c.searched) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[kAlgos];
    int found = 0;
    if (capturing(st)) {
      check(a.cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p.w, p.y, p.conv[kData], p.x, kAlgos,
                                                          &found, perf),
            "data gradient heuristic");
      c = first_success(perf, found, p.conv[kData], false, "data gradient");
    } else {
      check(a.cudnnFindConvolutionBackwardDataAlgorithmEx(
                h, p.w, w, p.y, dy, p.conv[kData], p.x, dx, kAlgos, &found, perf,
                workspace(kSearchWorkspace), kSearchWorkspace),
            "data gradient search");
      c = first_success(perf, found, p.conv[kData], true, "data gradient");
    }
  }
  const float one = 1, zero = 0;
  check(a.cudnnConvolutionBackwardData(h, &one, p.w, w, p.y, dy, p.conv[kData],
                                       static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo),
                                       workspace(c.workspace), c.workspace, &zero, p.x, dx),
        "cudnnConvolutionBackwardData");
}

void cudnn_backward_filter(const CudnnShape& s, const void* x, const void* dy, void* dw,
                           void* stream, int device, const Workspace& workspace) {
  std::lock_guard lock(mutex());
  const Api& a = api();
  cudnnHandle_t h = handle(device);
  const auto st = static_cast<cudaStream_t>(stream);
  check(a.cudnnSetStream(h, st), "cudnnSetStream");
  Plan& p = plan_for(s);
  Choice& c = p.choice[kFilter];
  if (!c.searched) {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[kAlgos];
    int found = 0;
    if (capturing(st)) {
      check(a.cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, p.x, p.y, p.conv[kFilter], p.w,
                                                            kAlgos, &found, perf),
            "filter gradient heuristic");
      c = first_success(perf, found, p.conv[kFilter], false, "filter gradient");
    } else {
      check(a.cudnnFindConvolutionBackwardFilterAlgorithmEx(
                h, p.x, x, p.y, dy, p.conv[kFilter], p.w, dw, kAlgos, &found, perf,
                workspace(kSearchWorkspace), kSearchWorkspace),
            "filter gradient search");
      c = first_success(perf, found, p.conv[kFilter], true, "filter gradient");
    }
  }
  const float one = 1, zero = 0;
  check(a.cudnnConvolutionBackwardFilter(h, &one, p.x, x, p.y, dy, p.conv[kFilter],
                                         static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo),
                                         workspace(c.workspace), c.workspace, &zero, p.w, dw),
        "cudnnConvolutionBackwardFilter");
}

}  // namespace ringlet::tensor::cuda

// The plugin's entry points (core/cuda_plugin.h); tensor/cuda/plugin_calls.cpp calls them.
namespace cuda = ringlet::tensor::cuda;
RINGLET_CUDA_PLUGIN_EXPORT const std::string* ringlet_cuda_cudnn_unavailable() {
  return &cuda::cudnn_unavailable();
}
RINGLET_CUDA_PLUGIN_EXPORT void ringlet_cuda_cudnn_forward(const cuda::CudnnShape& s, const void* x,
                                                           const void* w, void* y, void* stream,
                                                           int device,
                                                           const cuda::Workspace& workspace) {
  cuda::cudnn_forward(s, x, w, y, stream, device, workspace);
}
RINGLET_CUDA_PLUGIN_EXPORT void ringlet_cuda_cudnn_backward_data(const cuda::CudnnShape& s,
                                                                 const void* w, const void* dy,
                                                                 void* dx, void* stream, int device,
                                                                 const cuda::Workspace& workspace) {
  cuda::cudnn_backward_data(s, w, dy, dx, stream, device, workspace);
}
RINGLET_CUDA_PLUGIN_EXPORT void ringlet_cuda_cudnn_backward_filter(
    const cuda::CudnnShape& s, const void* x, const void* dy, void* dw, void* stream, int device,
    const cuda::Workspace& workspace) {
  cuda::cudnn_backward_filter(s, x, dy, dw, stream, device, workspace);
}
