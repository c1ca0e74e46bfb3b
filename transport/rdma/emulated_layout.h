// The shared-memory layout of the emulated verbs provider (emulated.cpp): what one process's
// emulated device exposes under /dev/shm for the processes whose QPs connect to it.
//
// An emulated context of process P (its n-th) owns, named "/ringlet-ibemu-P-n-...":
//  - "-mrs": the table of its memory regions peers may write (rkey -> owner address range and
//    the allocation holding it);
//  - "-buf<i>": allocation i (Context::allocate), the memory those regions lie in;
//  - "-qp<qpn>": per queue pair, its state, its receive queue (wr_ids posted by the owner,
//    taken by the peer's writes with immediate) and its inbound completions (pushed by the
//    peer, polled by the owner's receive CQ).
// The context's GID carries P and n, so a peer finds all of it from a QpEndpoint. Rings are
// single-producer single-consumer except the receive queue's tail, which the owner also
// advances (with compare-and-swap) when it flushes the queue.
#pragma once

#include <atomic>
#include <cstdint>

namespace ringlet::transport::rdma::emu {

inline constexpr std::uint64_t kQpMagic = 0x70715f756d656972ULL;  // "riemu_qp"
inline constexpr std::uint64_t kMrMagic = 0x726d5f756d656972ULL;  // "riemu_mr"
inline constexpr std::uint32_t kLayoutVersion = 1;
inline constexpr std::uint32_t kMaxWr = 4096;       // ring slots (power of two)
inline constexpr std::uint32_t kMaxRegions = 1024;  // remote-writable regions per context

struct InboundCompletion {
  std::uint64_t wr_id;
  std::uint32_t byte_len;
  std::uint32_t imm;
};

struct QpShared {
  std::uint64_t magic;
  std::uint32_t version;
  std::int32_t owner_pid;
  std::uint32_t qp_num;
  std::atomic<std::uint32_t> state;  // QpState
  // Receive queue: the owner posts (head), the peer's writes take (tail).
  alignas(64) std::atomic<std::uint64_t> rq_head;
  alignas(64) std::atomic<std::uint64_t> rq_tail;
  // Inbound completions: the peer pushes (head), the owner polls (tail).
  alignas(64) std::atomic<std::uint64_t> cq_head;
  alignas(64) std::atomic<std::uint64_t> cq_tail;
  // Bumped by the peer after a push when the owner announced it sleeps (futex word).
  alignas(64) std::atomic<std::uint32_t> cq_seq;
  std::atomic<std::uint32_t> cq_sleeping;
  alignas(64) std::uint64_t rq[kMaxWr];
  InboundCompletion cq[kMaxWr];
};

struct RegionEntry {
  std::atomic<std::uint32_t> generation;  // odd while valid; the rkey carries it
  std::uint32_t allocation;               // which "-buf<i>"
  std::uint64_t offset;                   // of the region's start inside that allocation
  std::uint64_t addr;                     // the region's start in the owner's address space
  std::uint64_t bytes;
};

struct RegionTable {
  std::uint64_t magic;
  std::uint32_t version;
  std::int32_t owner_pid;
  RegionEntry regions[kMaxRegions];
};

// rkey = generation (upper 16 bits) | region index (lower 16).
inline std::uint32_t make_rkey(std::uint32_t index, std::uint32_t generation) {
  return (generation << 16) | index;
}

}  // namespace ringlet::transport::rdma::emu
