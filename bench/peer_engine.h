// A peer library's collectives inside the nccl-tests harness (collective_bench.h): a peer
// program (bench/peers/nccl) times the peer's collectives with ringlet's flags, buffers,
// checking and table, so the two tables compare line for line. The harness keeps ringlet's
// host communicator for its own traffic (barriers around timed loops, combining the ranks'
// times, counting wrong results); only the measured ops go through the engine.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "bench/collective_bench.h"
#include "core/deadline.h"
#include "core/device.h"

namespace ringlet::bench {

// One collective as nccl-tests issues it: `count` is its paramcount (per rank for all_gather
// and reduce_scatter); in-place ops pass the buffers at nccl-tests' in-place offsets.
struct CollectiveCall {
  Collective coll;
  const void* send;
  void* recv;
  std::size_t count;
  core::DType dtype;
  collectives::ReduceOp op;
  int root;
};

class PeerEngine {
 public:
  virtual ~PeerEngine() = default;
  virtual core::Device device() const = 0;  // where the benchmark's buffers live
  virtual std::string label() const = 0;    // the table's transport column, e.g. "nccl 2.28.9"
  virtual void issue(const CollectiveCall& call) = 0;  // enqueues; returns before it runs
  virtual void drain(core::Deadline deadline) = 0;     // every issued op done, or throws
};

// A peer program: its programs' names (prefix + nccl-tests' name) and how a rank creates its
// engine once ringlet's communicator is up (the store carries the peer's own rendezvous).
struct PeerProgram {
  std::string prefix;
  std::function<std::unique_ptr<PeerEngine>(
      const BenchOptions& options, collectives::Communicator& comm, transport::Store& store)>
      create;
};

}  // namespace ringlet::bench
