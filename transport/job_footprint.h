// Whether a job of N local ranks fits this machine, checked before any rank starts: a job that
// cannot fit is refused at once with the figures, instead of meeting the OOM killer or a full
// /dev/shm after minutes. The estimate: every pair of local ranks shares one shm segment (the
// mesh connects all pairs; header + two rings of RINGLET_SHM_RING_BYTES, reserved up front)
// unless RINGLET_TRANSPORT is tcp or rdma, plus what each rank holds privately (the caller's
// figure: buffers, datasets). Both must fit in the memory the kernel calls available
// (MemAvailable; /dev/shm is memory too), and the segments in /dev/shm's free space.
#pragma once

#include <cstdint>
#include <string>

namespace ringlet::transport {

struct LocalJob {
  int ranks = 1;
  std::uint64_t private_bytes_per_rank = 0;
  std::string what;  // "all_reduce_perf -np 256": names the job in the error
};

struct MachineMemory {
  std::uint64_t available = 0;  // MemAvailable
  std::uint64_t shm_free = 0;   // /dev/shm's free bytes
};

// This machine's figures now.
MachineMemory machine_memory();

// The shared-memory bytes the job's segments take (0 when the transport is not shm).
std::uint64_t local_job_shm_bytes(int ranks);

// Throws core::ValueError naming the job, the estimate and the machine's figures when it does
// not fit within 90% of them; returns otherwise.
void check_local_job_fits(const LocalJob& job, const MachineMemory& machine = machine_memory());

}  // namespace ringlet::transport
