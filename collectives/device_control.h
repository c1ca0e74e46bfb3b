// DeviceControl: what the ranks of a device group share on the host so that their device ops
// never need a message: one block of shared memory per rank (transport/shm/window.h), which only
// its rank writes and every rank of the host maps and reads.
// - Fingerprints: a rank records the fingerprint of each device op it issues (by seq, the last
//   4096) and compares it with every peer's record of the same seq. Of two ranks that disagree,
//   the one that issues later finds it, at issue, with both fingerprints in the error.
// - Failure: a rank whose communicator failed writes the reason into its block, so that peers
//   whose device waits for it learn why (their watchdogs read it) instead of timing out.
// - Liveness: each rank publishes its pid through the store; peers in other processes watch it
//   (a pidfd, else /proc) and learn when it exits without having closed its control (a crash, a
//   kill). Ranks that are threads of this process live and die with it.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "collectives/fingerprint.h"
#include "collectives/peer_memory.h"
#include "core/deadline.h"
#include "transport/store.h"

namespace ringlet::collectives {

class DeviceControl {
 public:
  // Collective over the store (every rank of the group calls it with the same key): creates this
  // rank's block, publishes it with the pid, maps every peer's. Null on every rank when some rank
  // could not create or map a block (the reason is logged; device ops then use messages).
  static std::unique_ptr<DeviceControl> connect(transport::Store& store, const std::string& key,
                                                int rank, int size, core::Deadline deadline);
  ~DeviceControl();
  DeviceControl(const DeviceControl&) = delete;
  DeviceControl& operator=(const DeviceControl&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Whether every rank is a thread of this process.
  bool one_process() const;
  // Whether another rank is a thread of this process.
  bool shares_a_process() const;

  // Records this rank's fingerprint of op fp.seq.
  void publish(const Fingerprint& fp);
  // The first peer whose record of op fp.seq differs from `fp`, with its fingerprint; nothing
  // when every peer that recorded the op agrees (peers that have not issued it yet are not
  // checked: they check when they do).
  std::optional<std::pair<int, Fingerprint>> mismatch(const Fingerprint& fp) const;
  // The peers that have not issued op `seq` yet (no record of it).
  std::vector<int> not_issued(std::uint64_t seq) const;

  // Marks this rank failed with `reason` (the first reason stays).
  void set_failed(const std::string& reason);
  // The first peer that failed (with its reason) or exited, as a sentence; empty when none.
  // Cheap enough for each op's issue: shared-memory reads and one poll over the peers' pidfds.
  std::string peer_trouble() const;

 private:
  struct Block;
  DeviceControl(int rank, int size);
  Block& block(int rank) const;
  bool exited(int peer) const;
  int first_exited() const;  // of the peers that have not left, or -1

  int rank_, size_;
  SharedWindows blocks_;  // blocks_.mapped[p]: rank p's block, as mapped here
  std::vector<long> pids_;
  std::vector<int> pidfds_;  // -1 for this process's ranks, or where pidfd_open is not there
};

}  // namespace ringlet::collectives
