// RingletWork: the c10d::Work a ringlet op returns to torch. It holds the op's ringlet Works
// (one, or several for ops made of several collectives), is completed by ringlet's progress
// machinery (collectives::Work::on_done: the thread that finishes the last part runs `after`,
// the op's write-backs, then completes this Work and its future), so it behaves as gloo's:
// wait() blocks until then (rethrowing the op's error as a RuntimeError naming rank, op, seq
// and peer), is_completed() polls, get_future() chains (DDP's comm hooks). The ringlet op's own
// deadline is the group's timeout, from when it starts, and its error names the peer; wait()
// without a timeout of its own backs it up 5 s later.
#pragma once

#include <ATen/core/ivalue.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

#include "collectives/work.h"

namespace ringlet::torch_backend {

class RingletWork : public c10d::Work {
 public:
  RingletWork(int rank, c10d::OpType type, const char* name, std::vector<at::Tensor> outputs,
              std::chrono::milliseconds timeout);

  // Watches `parts`; once all are done runs `after` (unless one failed) and completes. Call
  // once, right after construction (the callbacks hold a reference to this Work).
  static c10::intrusive_ptr<c10d::Work> start(c10::intrusive_ptr<RingletWork> work,
                                              std::vector<collectives::WorkPtr> parts,
                                              std::function<void()> after);

  bool wait(std::chrono::milliseconds timeout) override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  void part_finished(const collectives::WorkPtr& part);
  void complete(std::exception_ptr error);

  const char* name_;
  std::vector<at::Tensor> outputs_;
  std::chrono::milliseconds timeout_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::vector<collectives::WorkPtr> parts_;
  std::function<void()> after_;
  std::atomic<int> left_{0};
  std::exception_ptr first_error_;  // under mutex_
};

}  // namespace ringlet::torch_backend
