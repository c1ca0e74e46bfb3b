#include "transport/job_footprint.h"

#include <sys/statvfs.h>

#include <fstream>
#include <sstream>

#include "core/env.h"
#include "core/error.h"
#include "transport/shm/segment.h"

namespace ringlet::transport {

namespace {

// "23.5 GiB", or "7.82 MiB" below a GiB.
std::string gib(std::uint64_t bytes) {
  std::ostringstream out;
  out.precision(3);
  if (bytes < (1ull << 30)) {
    out << static_cast<double>(bytes) / static_cast<double>(1ull << 20) << " MiB";
  } else {
    out << static_cast<double>(bytes) / static_cast<double>(1ull << 30) << " GiB";
  }
  return out.str();
}

std::uint64_t mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

}  // namespace

MachineMemory machine_memory() {
  MachineMemory m;
  m.available = mem_available();
  struct statvfs fs {};
  if (statvfs("/dev/shm", &fs) == 0) {
    m.shm_free = static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize;
  }
  return m;
}

std::uint64_t local_job_shm_bytes(int ranks) {
  const std::string transport = core::env_string("RINGLET_TRANSPORT").value_or("auto");
  if (transport == "tcp" || transport == "rdma" || ranks < 2) return 0;
  const auto pairs = static_cast<std::uint64_t>(ranks) * static_cast<std::uint64_t>(ranks - 1) / 2;
  return pairs * ShmSegment::configured_segment_bytes();
}

void check_local_job_fits(const LocalJob& job, const MachineMemory& machine) {
  const std::uint64_t shm = local_job_shm_bytes(job.ranks);
  const std::uint64_t total =
      shm + static_cast<std::uint64_t>(job.ranks) * job.private_bytes_per_rank;
  const auto within = [](std::uint64_t need, std::uint64_t have) {
    return have == 0 || need <= have / 10 * 9;  // an unknown figure (0) does not refuse
  };
  const std::string estimate = core::str(
      job.what, " needs about ", gib(total), ": ", job.ranks, " ranks x ",
      gib(job.private_bytes_per_rank), " each, and ", gib(shm), " of shared-memory segments (",
      static_cast<std::uint64_t>(job.ranks) * (job.ranks - 1) / 2, " rank pairs x ",
      gib(ShmSegment::configured_segment_bytes()), ")");
  RINGLET_CHECK(
      within(shm, machine.shm_free), ValueError, estimate, "; /dev/shm has ", gib(machine.shm_free),
      " free. Use fewer ranks, a smaller RINGLET_SHM_RING_BYTES or RINGLET_TRANSPORT=tcp");
  RINGLET_CHECK(within(total, machine.available), ValueError, estimate, "; this machine has ",
                gib(machine.available), " available. Use fewer ranks or smaller buffers");
}

}  // namespace ringlet::transport
