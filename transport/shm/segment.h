// ShmSegment: the /dev/shm mapping a pair of ranks on one host shares: a header (ranks, pids,
// attach and closed flags) and the pair's two rings. Its name is unlinked as soon as both sides
// mapped it, so a crash leaves nothing behind once the job has connected; a creator killed
// before its peer attached leaves its segment, which the next create() on the host removes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/deadline.h"
#include "transport/shm/ring.h"

namespace ringlet::transport {

// One mapped segment: a header (ranks, pids, attach and closed flags) plus two rings of
// ring_bytes() each. Ring capacity: RINGLET_SHM_RING_BYTES (a power of two, default 4 MiB),
// read by the creator; the opener takes whatever the header says. Move-only; unmaps on
// destruction and, if it was created here and the name is still linked, unlinks it.
// This process as another process on the host can watch it: "<pid>/<pid namespace>".
std::string process_token();

class ShmSegment {
 public:
  // Creates and maps a fresh segment (lower rank). Memory is reserved up front, so a full
  // /dev/shm is a clear error here rather than a SIGBUS later.
  static ShmSegment create(int local_rank, int peer_rank);
  // Maps an existing one (higher rank), checks it was made for this pair, records this process
  // as attached and unlinks the name.
  static ShmSegment open(const std::string& name, int local_rank, int peer_rank);
  // Unlinks the segments in `dir` (/dev/shm) that nobody will attach: made by a process of this
  // pid namespace that is gone, never attached. Returns how many. create() calls it once per
  // process, so a job killed in its connect phase leaves nothing past the next job's start.
  static int remove_stale(const std::string& dir = "/dev/shm");
  // The ring capacity create() uses (RINGLET_SHM_RING_BYTES), and a segment's whole size.
  static std::size_t configured_ring_bytes();
  static std::size_t configured_segment_bytes();

  ShmSegment(ShmSegment&& other) noexcept;
  ShmSegment& operator=(ShmSegment&&) = delete;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;
  ~ShmSegment();

  const std::string& name() const { return name_; }  // as passed to shm_open ("/ringlet-shm-...")
  bool creator() const { return creator_; }
  std::size_t ring_bytes() const { return ring_bytes_; }

  // Creator only: waits (in short futex sleeps, until the deadline) for the opener to attach,
  // then unlinks the name. TimeoutError naming the peer rank if it never does; PeerError at once
  // if `peer` (the opener's process, when known: process_token) exits first.
  void wait_attached(int local_rank, int peer_rank, core::Deadline deadline,
                     const std::string& peer = "");

  // Views for the connection. Side 0 is the creator; ring i carries side i's sends.
  ShmRing ring(int index) const;
  std::atomic<std::uint32_t>& closed_flag(int side) const;
  // A cache line of the header the two sides bounce once, when they connect (ShmConnection).
  std::atomic<std::uint64_t>& round_trip_line() const;
  // The process of `side`, or 0 if it lives in another pid namespace (then it cannot be watched).
  pid_t pid(int side) const;

 private:
  ShmSegment() = default;
  void unlink_name();

  std::string name_;
  void* base_ = nullptr;
  std::size_t mapped_bytes_ = 0;
  std::size_t ring_bytes_ = 0;
  bool creator_ = false;
  bool linked_ = false;
};

}  // namespace ringlet::transport
