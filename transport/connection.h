// Connection: an ordered, reliable, framed link to one peer, the one interface every
// transport (tcp, shm, rdma) implements and collectives use.
//
// Semantics:
//  - send(buf) / recv(buf) are asynchronous and return a Request; buffers are caller-owned and
//    must stay valid (and, for send, unmodified) until the request is done.
//  - Messages match in order: the k-th recv posted on this connection receives the k-th message
//    the peer sent. A message longer than the posted buffer is a PeerError (never an overrun);
//    a shorter one completes the recv with request->bytes() = its length.
//  - Any number of sends and recvs may be in flight in both directions at once.
//  - A dead peer (EOF, reset, killed process) or a protocol violation fails every pending and
//    later request with PeerError naming local rank, peer rank, transport and bytes moved.
//  - abort(reason) does the same on purpose (e.g. after a timeout in a collective).
//  - Buffers carry a Device; every transport here moves host memory and rejects a device buffer
//    with DeviceError. Device buffers reach the collectives through a BufferSpace instead
//    (collectives/buffer_space.h): staged through pinned host memory over these connections, or
//    read in place from device windows the ranks opened over IPC. A transport that moves device
//    memory itself (GPUDirect RDMA with registered device memory) would take them here.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "core/deadline.h"
#include "core/device.h"
#include "core/error.h"
#include "transport/request.h"

namespace ringlet::transport {

// The message size a pipelining collective cuts large buffers into, unless a transport prefers
// another (Connection::preferred_slice_bytes).
inline constexpr std::size_t kDefaultSliceBytes = 512 * 1024;

struct Buffer {
  void* data = nullptr;
  std::size_t bytes = 0;
  core::Device device = core::Device::cpu();
};

struct ConstBuffer {
  const void* data = nullptr;
  std::size_t bytes = 0;
  core::Device device = core::Device::cpu();
};

class Connection {
 public:
  virtual ~Connection() = default;
  virtual RequestPtr send(ConstBuffer buffer) = 0;
  virtual RequestPtr recv(Buffer buffer) = 0;
  virtual void abort(const std::string& reason) = 0;

  virtual int local_rank() const = 0;
  virtual int peer_rank() const = 0;
  virtual const char* transport() const = 0;  // "tcp", "shm", ...
  virtual std::uint64_t bytes_sent() const = 0;
  virtual std::uint64_t bytes_received() const = 0;
  // Messages posted on this connection (sends and joined sends), for the communicator's count
  // of host messages per op.
  std::uint64_t messages_sent() const { return messages_sent_.load(std::memory_order_relaxed); }

  // Single-copy reads of the peer's memory, for transports between processes of one host that
  // allow them (shm: Linux cross-memory attach). read_peer copies `bytes` at address `remote`
  // of the peer's address space into `dst` on the calling thread; the caller makes sure,
  // through messages, that the peer keeps that memory valid and unchanged meanwhile. A peer
  // that died or a range it does not map is a PeerError.
  virtual bool can_read_peer() const { return false; }
  virtual void read_peer(void* /*dst*/, std::uintptr_t /*remote*/, std::size_t /*bytes*/) {
    RINGLET_THROW(Error, "rank ", local_rank(), ": the ", transport(), " connection to rank ",
                  peer_rank(), " cannot read the peer's memory");
  }

  // Sends `head` followed by `body` as one message, if this transport can without the two being
  // copied into one buffer first: its request (shm: a head of up to 32 bytes, copied into the
  // request; complete on return where it went into the ring at once, nothing queued before it
  // and room in the ring, else queued as any send; tcp: a small head, a message not striped;
  // the body stays the caller's until the request completes, as send's buffer). Otherwise
  // null, having sent nothing, and the caller sends the message as usual.
  virtual RequestPtr try_send_joined(ConstBuffer /*head*/, ConstBuffer /*body*/) { return nullptr; }

  // Receives the next message where it lies, if this transport can (shm: no receive posted
  // before it, the whole message in the ring without wrapping round its end): waits for it
  // until `deadline` and calls use(message, bytes) on it there; if that returns true the
  // message is taken, and so is this call's result. Else false with nothing received (also
  // when `use` declines, say for a misaligned message, or the wait ends without one: a
  // failure, a closed or dead peer, the deadline, a message longer than max_bytes or than the
  // transport can hold whole), and the caller receives the message as usual, which reports what
  // went wrong. It saves copying the message out. receives_in_place(bytes): whether an
  // exchange of messages of `bytes` each way is worth trying that way (shm: messages it sends
  // at once, into the ring; a longer one is better received into a receive posted before the
  // send).
  using InPlace = std::function<bool(const std::byte* message, std::size_t bytes)>;
  virtual bool receives_in_place(std::size_t /*bytes*/) const { return false; }
  virtual bool recv_in_place(const InPlace& /*use*/, std::size_t /*max_bytes*/,
                             core::Deadline /*deadline*/) {
    return false;
  }

  // A receive its caller waits for next, with nothing to do meanwhile (a pipeline's only slice):
  // a transport may move its bytes on the waiting thread instead of handing them to a progress
  // thread, which would cost a wake-up each way and gain no overlap. Otherwise as recv.
  virtual RequestPtr recv_awaited(Buffer buffer) { return recv(buffer); }

  // The message size this transport moves best when a collective pipelines a large buffer
  // (the ring's slices): per-message costs against the overlap of sending with reducing.
  virtual std::size_t preferred_slice_bytes() const { return kDefaultSliceBytes; }

  // Conveniences for host memory.
  RequestPtr send(const void* data, std::size_t bytes) { return send(ConstBuffer{data, bytes}); }
  RequestPtr recv(void* data, std::size_t bytes) { return recv(Buffer{data, bytes}); }
  RequestPtr recv_awaited(void* data, std::size_t bytes) {
    return recv_awaited(Buffer{data, bytes});
  }

 protected:
  void count_message() { messages_sent_.fetch_add(1, std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> messages_sent_{0};
};

}  // namespace ringlet::transport
