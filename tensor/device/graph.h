// Graph: device work captured once and replayed with one launch (a CUDA graph; on the emulated
// device the stream keeps the tasks and runs them again). A training step captured after a
// warm-up replays its kernels on the same memory in the same order: the host does nothing per
// step but the launch and whatever it copies into the step's static inputs before it.
// - capture(stream, work) runs `work` with `stream` as the thread's current stream of its
//   device, recording what it queues there. Memory it allocates is the graph's (a private pool
//   of the caching allocator) until the graph is destroyed, so replays find it untouched.
// - What a capture cannot hold is refused with a CaptureError naming it and the op that asked,
//   and the capture is abandoned: a host read (item(), cpu(), a blocking copy), a host function
//   (an upload from pageable memory), an allocation the cache cannot serve (run the work once
//   first), dropout (its seed is drawn on the host).
// - replay() queues the whole graph on the captured stream: one stream operation, no host
//   synchronization.
#pragma once

#include <functional>
#include <memory>

#include "device/stream.h"

namespace ringlet::tensor {

class Graph {
 public:
  static std::unique_ptr<Graph> capture(const device::Stream& stream,
                                        const std::function<void()>& work);
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  void replay() const;
  const device::Stream& stream() const { return stream_; }

 private:
  Graph(device::Stream stream, device::GraphHandle handle, int pool);

  device::Stream stream_;
  device::GraphHandle handle_;
  int pool_;  // the allocator's pool of the memory the capture allocated
};

// Whether `device` has a capture in progress now (ops that draw from the host refuse then).
bool capturing(core::Device device);

}  // namespace ringlet::tensor
