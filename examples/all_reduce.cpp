// all_reduce: every rank contributes rank + 1 to a buffer of 8 floats and prints the sums, as
// the all-reduce example of PyTorch's "Writing Distributed Applications" does (README.md here
// shows the two side by side). Run under the launcher:
//   ringlet launch --nproc-per-node 2 ./all_reduce
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <ringlet/distributed/process_group.h>

namespace {
using ringlet::collectives::ReduceOp;
using ringlet::core::Deadline;
using ringlet::core::DType;
}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) {  // no flags: --help (or anything) prints how to run it
    std::printf(
        "usage: ringlet launch --nproc-per-node N %s\n"
        "each rank all-reduces 8 floats of rank + 1 and prints the sums\n",
        argv[0]);
    return std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h" ? 0 : 2;
  }
  const auto deadline = Deadline::after(std::chrono::seconds(60));
  // dist.init_process_group(): the rank, the world and the store from the launcher's variables.
  ringlet::distributed::DistributedContext job =
      ringlet::distributed::join_from_environment("all_reduce", deadline);
  const int rank = job.comm->rank(), world = job.comm->size();

  std::vector<float> data(8, static_cast<float>(rank + 1));
  job.comm->all_reduce(data.data(), data.data(), data.size(), DType::f32, ReduceOp::sum)
      ->wait(deadline);

  const float expected = static_cast<float>(world * (world + 1) / 2);
  bool exact = true;
  for (float v : data) exact = exact && v == expected;
  std::printf("rank %d of %d: all_reduce sum %g (expected %g): %s\n", rank, world, data[0],
              expected, exact ? "exact" : "WRONG");
  return exact ? 0 : 1;
}
