// The NCCL engine: one GPU per rank (its rank among the ranks of its host), a communicator from
// ncclCommInitRankConfig with the unique id passed through ringlet's store, NCCL's collectives
// on a stream of its own. NCCL is non-blocking here (config.blocking = 0) so that nothing
// waits without a deadline: init, every call that returns ncclInProgress and every drain poll
// ncclCommGetAsyncError (and cudaStreamQuery, as nccl-tests waits) and abort the communicator
// when the deadline passes.
#include "bench/peers/nccl/nccl_engine.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "core/env.h"
#include "core/error.h"
#include "transport/store.h"

namespace ringlet::bench {
namespace {

using collectives::ReduceOp;
using core::DType;

void cuda_check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  (void)cudaGetLastError();  // a caught error must not resurface at the next call
  RINGLET_THROW(DeviceError, "nccl peer: ", what, ": ", cudaGetErrorString(status));
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::f16: return ncclFloat16;
    case DType::bf16: return ncclBfloat16;
    case DType::i32: return ncclInt32;
    case DType::i64: return ncclInt64;
    default: break;
  }
  RINGLET_THROW(DTypeError, "nccl peer: dtype ", t, " has no NCCL type");
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::prod: return ncclProd;
    case ReduceOp::min: return ncclMin;
    case ReduceOp::max: return ncclMax;
    case ReduceOp::avg: return ncclAvg;
    default: break;
  }
  RINGLET_THROW(ValueError, "nccl peer: unknown reduction");
}

std::string version_text() {
  int code = 0;
  ncclGetVersion(&code);
  // NCCL_VERSION(X, Y, Z) = X * 10000 + Y * 100 + Z since 2.9.
  return core::str("nccl ", code / 10000, ".", code / 100 % 100, ".", code % 100);
}

// This rank's GPU: its index among the ranks of its host (LOCAL_RANK of LOCAL_WORLD_SIZE under a
// launcher; -np puts every rank on this host). NCCL takes one GPU per rank of a communicator
// (its guide: the same device as several ranks "is not supported and may lead to hangs"), so
// more ranks on a host than GPUs there is refused here, before NCCL is asked.
int place(const collectives::Communicator& comm) {
  const auto local_rank = core::env_int("LOCAL_RANK", comm.rank(), 0, 1 << 20);
  const auto local_world = core::env_int("LOCAL_WORLD_SIZE", comm.size(), 1, 1 << 20);
  int gpus = 0;
  const cudaError_t status = cudaGetDeviceCount(&gpus);
  if (status != cudaSuccess) (void)cudaGetLastError();
  RINGLET_CHECK(status == cudaSuccess && gpus > 0, DeviceError,
                "NCCL needs a CUDA GPU and this machine has none (",
                status == cudaSuccess ? "no device" : cudaGetErrorString(status),
                "); ringlet's all_reduce_perf runs without one (-g 1 uses the emulated device)");
  RINGLET_CHECK(local_world <= gpus, DeviceError, "NCCL cannot place ", local_world, " ranks on ",
                gpus, " GPU(s): it needs a GPU of its own for every rank of a host ",
                "(the same GPU as several ranks is not supported by NCCL); ringlet's "
                "all_reduce_perf -np ",
                local_world, " -g 1 shares the GPU(s) between its ranks over IPC");
  return static_cast<int>(local_rank);
}

class NcclEngine final : public PeerEngine {
 public:
  NcclEngine(collectives::Communicator& comm, transport::Store& store)
      : gpu_(place(comm)), label_(version_text()), timeout_(comm.timeout()) {
    cuda_check(cudaSetDevice(gpu_), "cudaSetDevice");
    cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    const auto deadline = core::Deadline::after(timeout_);
    const ncclUniqueId id = share_id(comm.rank(), store, deadline);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    call(ncclCommInitRankConfig(&comm_, comm.size(), id, comm.rank(), &config),
         "ncclCommInitRankConfig", deadline);
  }

  ~NcclEngine() override {
    // After a drain nothing is in flight; abort frees the communicator without a blocking
    // handshake with the peers (which may be gone after an error).
    if (comm_ != nullptr) ncclCommAbort(comm_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  core::Device device() const override { return core::Device::cuda(gpu_); }
  std::string label() const override { return label_; }

  void issue(const CollectiveCall& c) override {
    const auto deadline = core::Deadline::after(timeout_);
    const ncclDataType_t type = nccl_type(c.dtype);
    switch (c.coll) {
      case Collective::all_reduce:
        call(ncclAllReduce(c.send, c.recv, c.count, type, nccl_op(c.op), comm_, stream_),
             "ncclAllReduce", deadline);
        break;
      case Collective::all_gather:
        call(ncclAllGather(c.send, c.recv, c.count, type, comm_, stream_), "ncclAllGather",
             deadline);
        break;
      case Collective::reduce_scatter:
        call(ncclReduceScatter(c.send, c.recv, c.count, type, nccl_op(c.op), comm_, stream_),
             "ncclReduceScatter", deadline);
        break;
      case Collective::broadcast:
        call(ncclBroadcast(c.send, c.recv, c.count, type, c.root, comm_, stream_), "ncclBroadcast",
             deadline);
        break;
    }
  }

  void drain(core::Deadline deadline) override {
    for (;;) {
      const cudaError_t status = cudaStreamQuery(stream_);
      if (status == cudaSuccess) return;
      if (status != cudaErrorNotReady) cuda_check(status, "waiting for NCCL's stream");
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm_, &async);
      failed(async, "an NCCL collective");
      expire(deadline, "NCCL's collectives");
      std::this_thread::yield();
    }
  }

 private:
  static ncclUniqueId share_id(int rank, transport::Store& store, core::Deadline deadline) {
    ncclUniqueId id;
    if (rank == 0) {
      if (const ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) {
        RINGLET_THROW(DeviceError, "nccl peer: ncclGetUniqueId: ", ncclGetErrorString(r));
      }
      store.set("bench/nccl/id", std::string(reinterpret_cast<const char*>(&id), sizeof id));
      return id;
    }
    const std::string bytes = store.get("bench/nccl/id", deadline);
    RINGLET_CHECK(bytes.size() == sizeof id, ValueError, "nccl peer: the store's NCCL id has ",
                  bytes.size(), " bytes, not ", sizeof id);
    std::memcpy(&id, bytes.data(), sizeof id);
    return id;
  }

  // A non-blocking NCCL call: ncclInProgress means "poll the communicator until it settles".
  void call(ncclResult_t result, const char* what, core::Deadline deadline) {
    while (result == ncclInProgress) {
      expire(deadline, what);
      std::this_thread::yield();
      ncclCommGetAsyncError(comm_, &result);
    }
    failed(result, what);
  }

  void failed(ncclResult_t result, const char* what) const {
    if (result == ncclSuccess || result == ncclInProgress) return;
    RINGLET_THROW(CollectiveError, "nccl peer: ", what, " failed: ", ncclGetErrorString(result),
                  " (", ncclGetLastError(comm_), ")");
  }

  void expire(core::Deadline deadline, const char* what) {
    if (!deadline.expired()) return;
    if (comm_ != nullptr) ncclCommAbort(comm_);
    comm_ = nullptr;
    RINGLET_THROW(TimeoutError, "nccl peer: ", what, " did not complete by the deadline");
  }

  int gpu_;
  std::string label_;
  std::chrono::milliseconds timeout_;
  cudaStream_t stream_ = nullptr;
  ncclComm_t comm_ = nullptr;
};

}  // namespace

const PeerProgram& nccl_program() {
  static const PeerProgram program{
      "nccl_", [](const BenchOptions&, collectives::Communicator& comm, transport::Store& store) {
        return std::make_unique<NcclEngine>(comm, store);
      }};
  return program;
}

}  // namespace ringlet::bench
