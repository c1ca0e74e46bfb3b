// Reading device scalars one step late (a training loop's loss): push() queues the scalar's copy
// into pinned host memory and records an event behind it, without waiting; pop() waits for the
// oldest pushed copy's event and returns its value. A loop that pushes step k's loss and pops
// step k-1's waits once a step for work long done, instead of the device draining every step as
// loss.item() makes it. (On the host, push() reads at once and pop() waits for nothing.)
#pragma once

#include <cstddef>
#include <deque>
#include <memory>

#include "device/stream.h"
#include "tensor/tensor.h"

namespace ringlet::tensor {

class LateReads {
 public:
  // Queues the copy of a one-element tensor on its device's current stream.
  void push(const Tensor& scalar);
  std::size_t pending() const { return slots_.size(); }
  // The oldest pushed value (waiting for its copy: one host synchronization on a device, which
  // also raises the device's sticky error). LogicError when nothing is pending.
  double pop();

 private:
  struct Slot {
    Tensor pinned;                          // the copy's destination (host), or the value itself
    std::shared_ptr<device::Event> copied;  // null on the host
  };
  std::deque<Slot> slots_;
};

}  // namespace ringlet::tensor
