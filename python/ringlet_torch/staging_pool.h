// StagingPool: the host memory of the contiguous copies some ops need (a list of tensors laid end
// to end, a gather's flat output), kept and reused. Memory fresh from the system costs a page
// fault per 4 KiB on every op: a 16 MiB reduce_scatter from a list of tensors took 31 ms with
// fresh buffers and 3 ms on the flat-tensor path (2 ranks, this machine kind). A tensor from
// empty() returns its block to the pool when its storage is freed (its last view dropped), on
// whatever thread that is; the pool keeps at most kKeptBytes of free blocks.
#pragma once

#include <ATen/ATen.h>

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>

namespace ringlet::torch_backend {

class StagingPool {
 public:
  static constexpr std::size_t kKeptBytes = std::size_t{512} << 20;

  StagingPool() : state_(std::make_shared<State>()) {}

  // A contiguous CPU tensor of `sizes` and `type` in pooled memory (uninitialized).
  at::Tensor empty(at::IntArrayRef sizes, at::ScalarType type);

 private:
  struct State {
    std::mutex mutex;
    std::multimap<std::size_t, char*> free;  // block bytes -> block
    std::size_t free_bytes = 0;
    ~State();
  };
  std::shared_ptr<State> state_;  // shared with the tensors' deleters: they may outlive the pool
};

}  // namespace ringlet::torch_backend
