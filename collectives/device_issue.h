// DeviceIssue: one device collective queued from the caller's thread, with no host in the loop
// (device_collectives.h runs the protocols over it). A space that can (BufferSpace::
// issue_on_device) picks the op's stream when the op is issued: the caller's own stream while
// that stream is being captured into a graph (the op is recorded with the rest of the step),
// else the space's communication stream, made to wait for the caller's stream first. The
// copies, reductions and flag operations below queue there in order; finish() marks the end.
// DeviceCompletion: what the op's Work holds to learn that the device ran it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "collectives/types.h"
#include "core/deadline.h"

namespace ringlet::collectives {

class DeviceCompletion {
 public:
  virtual ~DeviceCompletion() = default;
  // True once the device has run the op (an event's query: no host wait).
  virtual bool done() = 0;
  // The op was recorded into a graph being captured: it runs whenever the graph replays, and
  // nothing here waits for it.
  virtual bool captured() const = 0;
};

class DeviceIssue {
 public:
  virtual ~DeviceIssue() = default;
  virtual void copy(void* dst, const void* src, std::size_t bytes) = 0;
  // dst = srcs[0] op srcs[1] op ... op srcs[k-1], in that order, so that every rank reducing the
  // same sources gets the same bits; dst may be srcs[0] and no other source. avg is refused (sum,
  // then divide_by).
  virtual void reduce(void* dst, const std::vector<const void*>& srcs, std::size_t count,
                      DType dtype, ReduceOp op) = 0;
  virtual void divide_by(void* data, std::size_t count, DType dtype, int divisor) = 0;
  // `*flag = 1` once everything queued before has run and its writes are visible.
  virtual void signal(std::uint32_t* flag) = 0;
  // Later work waits until `*flag == 1`; then `*flag = 0` (the flag is ready for its next use).
  virtual void wait_flag(std::uint32_t* flag) = 0;
  // Ends the op: its completion (an event recorded after its work, or captured()).
  virtual std::shared_ptr<DeviceCompletion> finish() = 0;
};

}  // namespace ringlet::collectives
