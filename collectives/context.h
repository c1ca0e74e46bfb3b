// ChannelContext: what an algorithm needs to run one collective's part on one channel: the
// channel's mesh, the op's deadline, scratch memory, tracing, and bookkeeping for error
// messages (the peer being waited on, bytes moved). Algorithms throw; the communicator wraps
// the error with this context.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <vector>

#include "collectives/trace.h"
#include "collectives/types.h"
#include "core/deadline.h"
#include "transport/mesh.h"

namespace ringlet::collectives {

struct ChannelContext {
  transport::Mesh* mesh = nullptr;
  int rank = 0;
  int size = 1;
  int channel = 0;
  Tracer* tracer = nullptr;
  std::size_t slice_bytes = 512 * 1024;
  std::vector<char> scratch;  // reused across ops
  // per op
  const char* op_name = "";
  std::uint64_t seq = 0;
  core::Deadline deadline = core::Deadline::never();
  int waiting_on = -1;           // the peer of the last wait (for error messages)
  std::uint64_t bytes_done = 0;  // payload bytes sent + received in this op
  // Set by an op that completes asynchronously (send/recv): the Work finishes when this
  // request does; deferred_check returns its error, if any.
  transport::RequestPtr deferred;
  std::function<std::exception_ptr()> deferred_check;

  transport::Connection& peer(int r) { return mesh->peer(r); }
  int right() const { return (rank + 1) % size; }
  int left() const { return (rank + size - 1) % size; }

  void wait(const transport::RequestPtr& request, int peer_rank) {
    waiting_on = peer_rank;
    request->wait(deadline);
    bytes_done += request->bytes();
  }

  char* scratch_bytes(std::size_t bytes) {
    if (scratch.size() < bytes) scratch.resize(bytes);
    return scratch.data();
  }

  void trace(int step, const char* phase, int chunk, int peer_rank, std::uint64_t bytes,
             std::chrono::steady_clock::time_point start) {
    if (tracer == nullptr || !tracer->enabled()) return;
    tracer->record(TraceEvent{op_name, seq, step, phase, chunk, peer_rank, channel, bytes, start,
                              std::chrono::steady_clock::now()});
  }
};

// Balanced split of `count` elements into `parts`: part i is [offset(i), offset(i + 1)).
inline std::size_t split_offset(std::size_t count, int parts, int i) {
  return count / parts * i + std::min<std::size_t>(i, count % parts);
}

}  // namespace ringlet::collectives
