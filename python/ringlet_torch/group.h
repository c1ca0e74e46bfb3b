// Group: one torch process group's collectives on a ringlet Communicator, for every torch
// version: tensors in, a RingletWork out. The version-specific class that torch calls
// (process_group_torch1.cpp derives c10d::ProcessGroup, process_group_torch2.cpp c10d::Backend)
// only forwards here.
//
// - Rendezvous: through the c10d::Store torch passes (torch_store.h), so every init method
//   torch has works; each group (the default one, every new_group) is a Communicator of its
//   own over its own prefix store, its transports chosen as ringlet chooses them (shm on one
//   host, tcp or rdma across), its deadline the group's timeout.
// - Memory: a contiguous CPU tensor goes to ringlet as it is (zero copy); a non-contiguous one,
//   a list of tensors, or an element type ringlet does not reduce (int8, int16: widened to
//   int32; bool reduces as bytes, sum and max being "or", product and min "and") through a
//   contiguous copy written back when the op is done.
// - Ops that reduce nothing move bytes, so they take every element type.
// - CPU tensors only: a CUDA tensor is refused, naming the op.
#pragma once

#include <chrono>
#include <memory>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

#include "collectives/communicator.h"
#include "staging_pool.h"
#include "torch_store.h"

namespace ringlet::torch_backend {

using WorkRef = c10::intrusive_ptr<c10d::Work>;
using TensorLists = std::vector<std::vector<at::Tensor>>;

class Group {
 public:
  Group(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
        std::chrono::milliseconds timeout);
  ~Group();

  WorkRef broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts);
  WorkRef allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts);
  WorkRef allreduce_coalesced(std::vector<at::Tensor>& tensors,
                              const c10d::AllreduceCoalescedOptions& opts);
  WorkRef reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts);
  WorkRef allgather(TensorLists& outputs, std::vector<at::Tensor>& inputs);
  WorkRef allgather_base(at::Tensor& output, at::Tensor& input);
  WorkRef gather(TensorLists& outputs, std::vector<at::Tensor>& inputs,
                 const c10d::GatherOptions& opts);
  WorkRef scatter(std::vector<at::Tensor>& outputs, TensorLists& inputs,
                  const c10d::ScatterOptions& opts);
  WorkRef reduce_scatter(std::vector<at::Tensor>& outputs, TensorLists& inputs,
                         const c10d::ReduceScatterOptions& opts);
  WorkRef reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                              const c10d::ReduceScatterOptions& opts);
  WorkRef alltoall_base(at::Tensor& output, at::Tensor& input,
                        const std::vector<std::int64_t>& output_splits,
                        const std::vector<std::int64_t>& input_splits);
  WorkRef alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs);
  WorkRef send(std::vector<at::Tensor>& tensors, int dst, int tag);
  WorkRef recv(std::vector<at::Tensor>& tensors, int src, int tag);
  WorkRef barrier();

 private:
  at::Tensor joined(const std::vector<at::Tensor>& flat);
  WorkRef finish(c10d::OpType type, const char* name, std::vector<at::Tensor> outputs,
                 std::vector<collectives::WorkPtr> parts, std::function<void()> after = {});

  int rank_, size_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<TorchStore> store_;  // outlives comm_
  std::unique_ptr<collectives::Communicator> comm_;
  StagingPool staging_;  // the ops' contiguous copies
};

}  // namespace ringlet::torch_backend
