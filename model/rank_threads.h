// The fit's ranks as threads of this process: on_threads() runs a body per rank and rethrows the
// first error; on_ranks() gives each rank a mesh of its own over a transport (all ranks on one
// CPU, or split between two CPUs); stay_on_cpu() and two_cpus() keep threads where
// the measurement needs them.
#pragma once

#include <functional>
#include <string>
#include <utility>

#include "transport/mesh.h"

namespace ringlet::model {

// body(0) .. body(ranks - 1), each on a thread of its own, all joined; then the first error any
// threw (the lowest rank's) is rethrown.
void on_threads(int ranks, const std::function<void(int rank)>& body);

inline void on_two_threads(const std::function<void(int rank)>& body) { on_threads(2, body); }

// Keeps the calling thread on `cpu`.
void stay_on_cpu(int cpu);

// The first two CPUs this process may run on; -1s where it has only one.
std::pair<int, int> two_cpus();

// body(rank, mesh) on `ranks` ranks, threads of this process with a mesh each over `transport`;
// with `one_cpu` all run on the CPU rank 0 started on, so every message waits for its receiver
// to get the CPU. Without it, each rank stays on one of two CPUs once connected, the even ranks on
// the first, the odd on the second (the connection's threads, started by then, go where the
// scheduler puts them): left to the scheduler, two ranks sometimes share one CPU for a whole
// sitting, and a message then costs what it does on one CPU.
void on_ranks(const std::string& transport, int ranks, bool one_cpu,
              const std::function<void(int rank, transport::Mesh& mesh)>& body);

}  // namespace ringlet::model
