// Communicator: collectives over a group of ranks (DESIGN.md, "The life of a collective").
//
// - Every call is asynchronous: it validates, queues the op and returns a Work. Ops run in
//   issue order on the communicator's progress threads (one per channel; scheduler.h); every
//   rank must issue the same sequence, as with NCCL and Gloo. A small collective (at most
//   RINGLET_INLINE_BYTES, default 64 KiB) issued while nothing is queued or running runs on
//   the calling thread instead, saving two thread hand-offs; its Work is done on return.
// - Buffers are (pointer, count, dtype) on the host; they must stay valid until the Work is
//   done. send == recv means in place.
// - Device buffers come with their BufferSpace (buffer_space.h; device_space.h makes
//   one for a device): the op is ordered after the caller's current stream at issue and its Work
//   completes once the device has run it. Where the ranks synchronize through flags in their
//   device windows (device_collectives.h), a collective is queued on the device from the
//   caller's thread in one go: one-shot or two-shot kernels between flag barriers, no progress
//   thread, no host wait, no message; its fingerprint checked against the peers' records in
//   shared host memory (device_control.h), a watchdog thread failing it at its deadline or when
//   a peer fails or dies (device_watchdog.h); issued while the caller's stream is captured, it
//   becomes part of the graph. Otherwise it runs on channel 0's progress thread, on the space's
//   communication stream (host-driven device windows over IPC, or staged through pinned host
//   memory over the connections), fenced between steps; never inline. Sends and receives of
//   device buffers always take that path.
// - Each collective carries its Fingerprint (fingerprint.h); a rank whose peer disagrees
//   fails, and so does every other rank, with both fingerprints in the message.
// - Every wait is bounded by the op's deadline (RINGLET_TIMEOUT ms, default 10 minutes). A dead
//   or silent peer fails the op on every rank with a CollectiveError naming the local rank, the
//   failed peer, the op, its seq and the bytes done; the communicator is then aborted and every
//   later call fails fast with the same cause, which is also published in the store so that
//   ranks that only saw a neighbour hang up can report the root cause (failure_policy.h).
// - All-reduce algorithms (algorithm_choice.h): shared windows or cross-memory attach between
//   shm ranks that can map / read each other's memory, recursive doubling for small messages,
//   the hierarchical all-reduce on several hosts (topology.h), the ring (reduce-scatter +
//   all-gather, channels x pipelined slices) elsewhere;
//   RINGLET_ALGO overrides. Ring reduce-scatter / all-gather; pipelined chain broadcast and
//   reduce; dissemination barrier.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "collectives/algorithm_choice.h"
#include "collectives/buffer_space.h"
#include "collectives/options.h"
#include "collectives/trace.h"
#include "collectives/types.h"
#include "collectives/work.h"
#include "core/error.h"
#include "transport/mesh.h"
#include "transport/store.h"

namespace ringlet::collectives {

// Every failed collective: names the local rank, the op, its seq, the peer waited on, the
// bytes done, and (when another rank saw it first) the root cause.
using core::CollectiveError;

// What this rank's ops have cost its host so far (all_reduce_perf prints them per op): ops
// issued; host waits for a device made on their behalf (fences between steps; a device op with
// device flags makes none); messages sent on the connections, every channel (fingerprints and
// handshakes included; a device op with device flags sends none).
struct CommCounters {
  std::uint64_t ops = 0, host_waits = 0, host_messages = 0;
  CommCounters operator-(const CommCounters& before) const {
    return {ops - before.ops, host_waits - before.host_waits, host_messages - before.host_messages};
  }
};

class Communicator {
 public:
  // Connects `channels` meshes through the store (mesh options give rank, size, transport...)
  // and starts the progress threads. The store must outlive the communicator.
  static std::unique_ptr<Communicator> create(transport::Store& store,
                                              const transport::MeshOptions& mesh,
                                              CommOptions options, core::Deadline deadline);
  ~Communicator();  // runs what is queued, joins the threads, writes the trace

  int rank() const;
  int size() const;
  std::chrono::milliseconds timeout() const;
  // The transports of this rank's connections, sorted and joined by '+' ("shm", "shm+tcp");
  // "none" for a single rank.
  std::string transports() const;
  // The algorithm an all_reduce of `bytes` per rank runs: on host buffers, or on a device
  // space's (space). RINGLET_LOG=debug logs each all_reduce's choice as it is issued.
  Algorithm all_reduce_algorithm(std::size_t bytes, const BufferSpace* space = nullptr) const;
  // The algorithm an all_gather runs (the ring; Bruck's or recursive doubling where
  // RINGLET_ALGO=bruck or rabenseifner), and a reduce_scatter (the ring; recursive halving where
  // RINGLET_ALGO=rabenseifner).
  Algorithm all_gather_algorithm(const BufferSpace* space = nullptr) const;
  Algorithm reduce_scatter_algorithm(const BufferSpace* space = nullptr) const;

  WorkPtr all_reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op,
                     BufferSpace* space = nullptr);
  // send holds size() * recv_count elements; rank r receives the reduced block r.
  WorkPtr reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType dtype,
                         ReduceOp op, BufferSpace* space = nullptr);
  // recv holds size() * send_count elements; block r comes from rank r.
  WorkPtr all_gather(const void* send, void* recv, std::size_t send_count, DType dtype,
                     BufferSpace* space = nullptr);
  WorkPtr broadcast(void* data, std::size_t count, DType dtype, int root,
                    BufferSpace* space = nullptr);
  // recv is written on root only (may be null elsewhere).
  WorkPtr reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op,
                 int root, BufferSpace* space = nullptr);
  // Personalized collectives (host buffers; communicator_groups.cpp). Gather: recv (root
  // only, may be null elsewhere) holds size() * count elements, block r from rank r. Scatter:
  // send (root only) holds size() * count elements, block r for rank r.
  WorkPtr gather(const void* send, void* recv, std::size_t count, DType dtype, int root);
  WorkPtr scatter(const void* send, void* recv, std::size_t count, DType dtype, int root);
  // All-to-all with a count per peer (MPI's alltoallv): send_counts[p] elements at
  // send + send_offsets[p] go to rank p, which receives them at recv + recv_offsets[p] of its
  // own (recv_counts[p] there must match). Offsets and counts are in elements.
  WorkPtr all_to_all(const void* send, const std::vector<std::size_t>& send_counts,
                     const std::vector<std::size_t>& send_offsets, void* recv,
                     const std::vector<std::size_t>& recv_counts,
                     const std::vector<std::size_t>& recv_offsets, DType dtype);
  // The same with `count` elements for every peer, blocks in rank order.
  WorkPtr all_to_all(const void* send, void* recv, std::size_t count, DType dtype);
  WorkPtr barrier();

  // A sub-communicator over `ranks` (distinct ranks of this one; rank i of the new one is
  // ranks[i]), connected through the same store with this one's options, as torch's new_group.
  // Every rank of this communicator calls it, in the same order with the same lists (the calls
  // are numbered); a rank not in `ranks` gets null.
  std::unique_ptr<Communicator> new_group(const std::vector<int>& ranks, core::Deadline deadline);
  WorkPtr send(const void* data, std::size_t count, DType dtype, int peer,
               BufferSpace* space = nullptr);
  WorkPtr recv(void* data, std::size_t count, DType dtype, int peer, BufferSpace* space = nullptr);

  // The rank's trace (trace.h): collectives record their steps there while it is enabled;
  // callers may open it later and add their own spans.
  Tracer& tracer();

  // Fails every queued and later op with `reason`.
  void abort(const std::string& reason);
  bool aborted() const;

  // Writes this rank's flight recorder (flight_recorder.h: its last RINGLET_FR_SIZE ops) to
  // RINGLET_FR_DIR (or CommOptions::flight_recorder_dir) as rank<R>.json, as a failure does on its
  // own; returns the file written, or why there is none.
  std::string dump_flight_recorder(const std::string& reason);
  // Where a program outside the job reaches its store, and with it the status board
  // (`ringlet status`, status_board.h): "host:port", or empty when it cannot.
  std::string store_address() const;

  CommCounters counters() const;

  struct Impl;

 private:
  explicit Communicator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringlet::collectives
