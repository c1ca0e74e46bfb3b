// transport/job_footprint.h: a job of N local ranks is refused up front, naming the estimate
// and the machine's figures, when its shm segments (one per rank pair) and its ranks' private
// memory would not fit; it passes when they do, and without shm when the transport is tcp.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <string>

#include "core/error.h"
#include "transport/job_footprint.h"
#include "transport/shm/segment.h"

using namespace ringlet;
using transport::LocalJob;
using transport::MachineMemory;

namespace {

constexpr std::uint64_t kGiB = 1ull << 30;

std::string refusal(const LocalJob& job, const MachineMemory& machine) {
  try {
    transport::check_local_job_fits(job, machine);
  } catch (const core::ValueError& e) {
    return e.what();
  }
  return "accepted";
}

}  // namespace

TEST_CASE("a local job's memory: refused with the figures when it cannot fit") {
  unsetenv("RINGLET_TRANSPORT");
  unsetenv("RINGLET_SHM_RING_BYTES");
  const std::uint64_t segment = transport::ShmSegment::configured_segment_bytes();
  CHECK(segment > 8ull << 20);  // header + two 4 MiB rings
  CHECK(transport::local_job_shm_bytes(1) == 0);
  CHECK(transport::local_job_shm_bytes(4) == 6 * segment);
  const MachineMemory machine{20 * kGiB, 12 * kGiB};

  CHECK(refusal({8, 300ull << 20, "ringlet train --nproc 8"}, machine) == "accepted");
  // 65 ranks: 2080 pairs of 8 MiB segments, more than /dev/shm holds.
  const std::string shm = refusal({65, 300ull << 20, "ringlet train --nproc 65"}, machine);
  CHECK(shm.find("ringlet train --nproc 65 needs about") != std::string::npos);
  CHECK(shm.find("2080 rank pairs") != std::string::npos);
  CHECK(shm.find("/dev/shm has 12 GiB free") != std::string::npos);
  CHECK(shm.find("RINGLET_TRANSPORT=tcp") != std::string::npos);
  // Private memory alone: 256 ranks x 96 MiB over tcp.
  setenv("RINGLET_TRANSPORT", "tcp", 1);
  CHECK(transport::local_job_shm_bytes(256) == 0);
  const std::string memory = refusal({256, 96ull << 20, "all_reduce_perf -np 256"}, machine);
  CHECK(memory.find("256 ranks x 96 MiB each") != std::string::npos);
  CHECK(memory.find("this machine has 20 GiB available") != std::string::npos);
  unsetenv("RINGLET_TRANSPORT");
  // A figure the machine does not give (0) refuses nothing.
  CHECK(refusal({65, 300ull << 20, "x"}, MachineMemory{}) == "accepted");
  CHECK(transport::machine_memory().available > 0);
}
