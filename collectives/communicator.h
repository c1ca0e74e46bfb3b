// Communicator: collectives over a group of ranks (see DESIGN.md, "Communicator model").
//
// - Every call is asynchronous: it validates, queues the op and returns a Work. Ops run in
//   issue order on the communicator's progress threads (one per channel); every rank must
//   issue the same sequence, as with NCCL and Gloo. A small collective (at most
//   RINGLET_INLINE_BYTES, default 64 KiB) issued while nothing is queued or running runs on
//   the calling thread instead, saving two thread hand-offs; its Work is done on return.
// - Buffers are (pointer, count, dtype) on the host; they must stay valid until the Work is
//   done. send == recv means in place.
// - Each collective's first message carries its Fingerprint; a rank whose neighbour disagrees
//   fails, and so does every other rank, with both fingerprints in the message.
// - Every wait is bounded by the op's deadline (RINGLET_TIMEOUT ms, default 10 minutes). A dead
//   or silent peer fails the op on every rank with a CollectiveError naming the local rank, the
//   failed peer, the op, its seq and the bytes done; the communicator is then aborted and every
//   later call fails fast with the same cause. The first cause is also published in the store
//   so that ranks that only saw a neighbour hang up can report the root cause.
// - Algorithms: ring (reduce-scatter + all-gather, channels x pipelined slices) for large
//   all-reduces, recursive doubling (with the non-power-of-two fold) for small ones, chosen by
//   size (RINGLET_ALGO=ring|rd overrides); ring reduce-scatter / all-gather; pipelined chain
//   broadcast and reduce; dissemination barrier.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "collectives/types.h"
#include "collectives/work.h"
#include "core/error.h"
#include "transport/mesh.h"
#include "transport/store.h"

namespace ringlet::collectives {

// Every failed collective: names the local rank, the op, its seq, the peer waited on, the
// bytes done, and (when another rank saw it first) the root cause.
using core::CollectiveError;

struct CommOptions {
  std::chrono::milliseconds timeout{0};  // per op; 0 = RINGLET_TIMEOUT or 10 minutes
  std::string algo;  // "auto", "ring", "rd", "direct", "window"; empty = RINGLET_ALGO or auto
  std::size_t rd_max_bytes = 0;      // auto uses rd up to this size; 0 = measured default
  std::size_t direct_min_bytes = 0;  // auto uses direct from this size (when every pair can
                                     // read each other's memory); 0 = measured default
  std::size_t window_min_bytes = 0;  // auto uses shared windows from this size (when the
                                     // ranks have them); 0 = measured default
  int channels = 0;                  // rings in parallel; 0 = RINGLET_CHANNELS or 1
  std::size_t slice_bytes = 0;       // pipelining unit; 0 = RINGLET_SLICE_BYTES, else per transport
  std::int64_t window_bytes = -1;    // shared window per rank when all are on one host with shm;
                                     // -1 = RINGLET_SHM_WINDOW_BYTES or size x 512 KiB, 0 = none
  std::int64_t inline_bytes = -1;    // run on the caller up to this; -1 = env or 64 KiB
  std::string trace_dir;             // empty = RINGLET_TRACE (unset: no tracing)
  std::string name = "comm";         // store prefix for this communicator
};

class Communicator {
 public:
  // Connects `channels` meshes through the store (mesh options give rank, size, transport...)
  // and starts the progress threads. The store must outlive the communicator.
  static std::unique_ptr<Communicator> create(transport::Store& store,
                                              const transport::MeshOptions& mesh,
                                              CommOptions options, core::Deadline deadline);
  ~Communicator();  // aborts queued ops, joins threads, writes the trace

  int rank() const;
  int size() const;
  std::chrono::milliseconds timeout() const;

  WorkPtr all_reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op);
  // send holds size() * recv_count elements; rank r receives the reduced block r.
  WorkPtr reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType dtype,
                         ReduceOp op);
  // recv holds size() * send_count elements; block r comes from rank r.
  WorkPtr all_gather(const void* send, void* recv, std::size_t send_count, DType dtype);
  WorkPtr broadcast(void* data, std::size_t count, DType dtype, int root);
  // recv is written on root only (may be null elsewhere).
  WorkPtr reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op,
                 int root);
  WorkPtr barrier();
  WorkPtr send(const void* data, std::size_t count, DType dtype, int peer);
  WorkPtr recv(void* data, std::size_t count, DType dtype, int peer);

  // Fails every queued and later op with `reason`.
  void abort(const std::string& reason);
  bool aborted() const;

  struct Impl;

 private:
  explicit Communicator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringlet::collectives
