// RingletFace<Base>: the class torch calls for backend "ringlet", every op forwarded to Group
// (group.h). Base is the torch version's: c10d::ProcessGroup in torch 1.x
// (process_group_torch1.cpp), c10d::Backend in torch 2.x (process_group_torch2.cpp); the ops'
// signatures are the same in both.
#pragma once

#include "group.h"

namespace ringlet::torch_backend {

template <class Base>
class RingletFace final : public Base {
 public:
  RingletFace(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
              std::chrono::milliseconds timeout)
      : Base(rank, size), group_(store, rank, size, timeout) {}

  const std::string getBackendName() const override { return "ringlet"; }

  WorkRef broadcast(std::vector<at::Tensor>& t, const c10d::BroadcastOptions& o) override {
    return group_.broadcast(t, o);
  }
  WorkRef allreduce(std::vector<at::Tensor>& t, const c10d::AllreduceOptions& o) override {
    return group_.allreduce(t, o);
  }
  WorkRef allreduce_coalesced(std::vector<at::Tensor>& t,
                              const c10d::AllreduceCoalescedOptions& o) override {
    return group_.allreduce_coalesced(t, o);
  }
  WorkRef reduce(std::vector<at::Tensor>& t, const c10d::ReduceOptions& o) override {
    return group_.reduce(t, o);
  }
  WorkRef allgather(TensorLists& out, std::vector<at::Tensor>& in,
                    const c10d::AllgatherOptions&) override {
    return group_.allgather(out, in);
  }
  WorkRef _allgather_base(at::Tensor& out, at::Tensor& in, const c10d::AllgatherOptions&) override {
    return group_.allgather_base(out, in);
  }
  WorkRef gather(TensorLists& out, std::vector<at::Tensor>& in,
                 const c10d::GatherOptions& o) override {
    return group_.gather(out, in, o);
  }
  WorkRef scatter(std::vector<at::Tensor>& out, TensorLists& in,
                  const c10d::ScatterOptions& o) override {
    return group_.scatter(out, in, o);
  }
  WorkRef reduce_scatter(std::vector<at::Tensor>& out, TensorLists& in,
                         const c10d::ReduceScatterOptions& o) override {
    return group_.reduce_scatter(out, in, o);
  }
  WorkRef _reduce_scatter_base(at::Tensor& out, at::Tensor& in,
                               const c10d::ReduceScatterOptions& o) override {
    return group_.reduce_scatter_base(out, in, o);
  }
  WorkRef alltoall_base(at::Tensor& out, at::Tensor& in, std::vector<std::int64_t>& out_splits,
                        std::vector<std::int64_t>& in_splits,
                        const c10d::AllToAllOptions&) override {
    return group_.alltoall_base(out, in, out_splits, in_splits);
  }
  WorkRef alltoall(std::vector<at::Tensor>& out, std::vector<at::Tensor>& in,
                   const c10d::AllToAllOptions&) override {
    return group_.alltoall(out, in);
  }
  WorkRef send(std::vector<at::Tensor>& t, int dst, int tag) override {
    return group_.send(t, dst, tag);
  }
  WorkRef recv(std::vector<at::Tensor>& t, int src, int tag) override {
    return group_.recv(t, src, tag);
  }
  WorkRef barrier(const c10d::BarrierOptions&) override { return group_.barrier(); }

 private:
  Group group_;
};

}  // namespace ringlet::torch_backend
