// The narrow verbs interface the rdma transport is written against: the dozen calls of
// libibverbs it uses (open a device, query its port and GID, register memory, a completion
// queue, a reliable-connected queue pair through INIT, RTR and RTS, RDMA write with immediate,
// posted receives, polling). Two providers implement it: libibverbs itself (ibverbs.cpp, for
// InfiniBand and RoCE hardware) and an emulation across processes of one host (emulated.cpp),
// so the transport above runs the same code in tests on machines without an RDMA device.
//
// Semantics follow the verbs specification for RC queue pairs, as far as the transport uses
// them:
//  - Writes posted on one QP are applied at the peer in posting order; a write with immediate
//    consumes one receive posted at the peer and completes it there with the immediate and the
//    byte count. With no receive posted the write is retried, then fails (RNR retry exceeded).
//  - A work request that fails completes with an error status, the QP moves to the error
//    state, and every request still queued on it completes with `flushed`.
//  - A write to a peer that is gone or whose QP is in error fails with `retry_exceeded`; one
//    outside the peer's registered region (or its rkey) fails with `remote_access`.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ringlet::transport::rdma {

enum class LinkLayer { infiniband, ethernet };

// A port as ibv_query_port describes it (the fields the transport needs).
struct PortInfo {
  bool active = false;
  LinkLayer link_layer = LinkLayer::infiniband;
  std::uint16_t lid = 0;
  int mtu_bytes = 1024;  // the active MTU
};

using Gid = std::array<std::uint8_t, 16>;

// What one end of a QP tells the other (through the store) to connect it.
struct QpEndpoint {
  std::uint32_t qp_num = 0;
  std::uint32_t psn = 0;  // first packet sequence number this end sends
  std::uint16_t lid = 0;  // InfiniBand: the port's LID; 0 on RoCE
  Gid gid{};              // RoCE (and routed InfiniBand): the GID at the chosen index
  int mtu_bytes = 1024;
};

enum class QpState { reset, init, rtr, rts, error };
const char* qp_state_name(QpState state);

enum class WcStatus {
  success,
  flushed,           // IBV_WC_WR_FLUSH_ERR: the QP went to error before this request ran
  retry_exceeded,    // IBV_WC_RETRY_EXC_ERR: the peer did not answer (gone, or its QP failed)
  rnr_exceeded,      // IBV_WC_RNR_RETRY_EXC_ERR: the peer had no receive posted
  remote_access,     // IBV_WC_REM_ACCESS_ERR: outside the peer's region, or a wrong rkey
  local_protection,  // IBV_WC_LOC_PROT_ERR: the local buffer is not in the lkey's region
  other,
};
const char* wc_status_name(WcStatus status);

enum class WcOpcode { rdma_write, recv_rdma_with_imm };

struct WorkCompletion {
  std::uint64_t wr_id = 0;
  WcStatus status = WcStatus::success;
  WcOpcode opcode = WcOpcode::rdma_write;
  std::uint32_t byte_len = 0;  // receives: bytes the peer wrote
  std::uint32_t imm = 0;       // receives: the immediate (host order)
  std::string detail;          // errors: the provider's words (device, peer, address)
};

// Registered memory: lkey for local use in work requests, rkey for the peer's writes.
class MemoryRegion {
 public:
  virtual ~MemoryRegion() = default;
  virtual void* addr() const = 0;
  virtual std::size_t bytes() const = 0;
  virtual std::uint32_t lkey() const = 0;
  virtual std::uint32_t rkey() const = 0;
};

class CompletionQueue {
 public:
  virtual ~CompletionQueue() = default;
  // Up to `max` completions into `out` (never blocks); how many.
  virtual int poll(WorkCompletion* out, int max) = 0;
  // Returns when a completion may have arrived, or after about max_wait (spuriously too):
  // what a poller calls between empty polls instead of spinning.
  virtual void wait(std::chrono::microseconds max_wait) = 0;
};

// One RDMA write: `bytes` from local memory (in the lkey's region) to remote_addr in the peer's
// region rkey; with_imm makes it consume a receive at the peer and complete there with `imm`.
struct WriteRequest {
  std::uint64_t wr_id = 0;
  const void* local = nullptr;
  std::size_t bytes = 0;
  std::uint32_t lkey = 0;
  std::uint64_t remote_addr = 0;
  std::uint32_t rkey = 0;
  bool with_imm = false;
  std::uint32_t imm = 0;
  bool signaled = true;  // completes on the send CQ (unsignaled ones only when they fail)
};

class QueuePair {
 public:
  virtual ~QueuePair() = default;
  virtual std::uint32_t qp_num() const = 0;
  virtual QpState state() const = 0;
  // RESET -> INIT -> RTR (knowing the peer's endpoint) -> RTS. Errors throw core::Error.
  virtual void to_init() = 0;
  virtual void to_rtr(const QpEndpoint& remote) = 0;
  virtual void to_rts(std::uint32_t local_psn) = 0;
  // Moves the QP to the error state: queued requests complete as flushed.
  virtual void to_error() = 0;
  // Posting on a QP that is not ready (or with a full queue) throws; a request that fails once
  // posted completes with an error status instead.
  virtual void post_write(const WriteRequest& request) = 0;
  virtual void post_recv(std::uint64_t wr_id) = 0;
};

struct QpCaps {
  int max_send_wr = 256;
  int max_recv_wr = 256;
  int gid_index = 0;  // the local GID the QP sends from (RoCE)
};

// An opened device (ibv_context plus one protection domain) on one port.
class Context {
 public:
  virtual ~Context() = default;
  virtual std::string device_name() const = 0;
  virtual bool emulated() const = 0;
  virtual int port() const = 0;
  virtual PortInfo port_info() const = 0;
  virtual Gid gid(int index) const = 0;
  // The GID index to use when RINGLET_IB_GID_INDEX does not say: on RoCE the RoCE v2 entry
  // with an IPv4-mapped address (as NCCL picks), else 0.
  virtual int default_gid_index() const = 0;
  // Memory the peer may write into must come from here (page-aligned; the emulated provider
  // places it in a shared mapping); freed when the context is destroyed or by release().
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void release(void* memory) = 0;
  // remote_write: the peer may write into it (then `addr` must lie in allocate()d memory).
  virtual std::unique_ptr<MemoryRegion> register_memory(void* addr, std::size_t bytes,
                                                        bool remote_write) = 0;
  virtual std::unique_ptr<CompletionQueue> create_cq(int depth) = 0;
  virtual std::unique_ptr<QueuePair> create_qp(CompletionQueue& send_cq, CompletionQueue& recv_cq,
                                               const QpCaps& caps) = 0;
};

// A source of devices: libibverbs, or the emulation.
class Provider {
 public:
  virtual ~Provider() = default;
  virtual const char* name() const = 0;  // "libibverbs", "emulated"
  virtual std::vector<std::string> devices() = 0;
  // Opens `device` on `port` (1-based, as in verbs).
  virtual std::unique_ptr<Context> open(const std::string& device, int port) = 0;
};

// The providers compiled into this build: the emulation always, libibverbs with -Drdma.
Provider& emulated_provider();
Provider* ibverbs_provider();  // null when built without libibverbs

}  // namespace ringlet::transport::rdma
