// measure_op_us(): the communicator's own cost per op by algorithm (Profile::op_us), for
// `ringlet model fit`: what an all-reduce of 8 bytes takes through two ranks' communicators
// beyond what the simulation of the same op gives. The simulation runs the algorithm's steps;
// what is left is the communicator around them (issuing the op, its requests and records, the
// algorithm's setup), as NCCL's tuning model keeps a base latency per algorithm.
#pragma once

#include <map>
#include <string>

#include "model/profile.h"

namespace ringlet::model {

// Each all-reduce algorithm the simulator runs for two ranks of one host under `profile`: two
// threads of this process, a communicator each over shm (the algorithm asked for by name), the
// time between rank 0's 8-byte float32 all-reduces, issued 32 at a time as all_reduce_perf keeps
// them in flight (the median of `ops` / 32 batches, after as many to warm up; the fastest of
// `sittings`, each with new communicators, as the links' fits keep theirs), less its simulation
// under `profile` (whose own op_us is left out); at least 0, microseconds.
std::map<std::string, double> measure_op_us(const Profile& profile, int ops, int sittings);

}  // namespace ringlet::model
