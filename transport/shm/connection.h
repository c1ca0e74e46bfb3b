// ShmConnection: the Connection for two ranks on one host, through one ShmSegment holding two
// ShmRings (one per direction). Each message is an 8-byte length frame, the payload, and zero
// padding to a multiple of 8 bytes (so every payload starts 8-byte aligned in the ring, and a
// reader may use it in place as any element type), streamed through the ring in chunks. connect_shm
// does the rendezvous through the store.
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/deadline.h"
#include "transport/connection.h"
#include "transport/shm/process_watch.h"
#include "transport/shm/ring.h"
#include "transport/shm/segment.h"

namespace ringlet::transport {

class Store;

// Messages up to this size are moved by the posting thread when the direction is idle and the
// ring has room (send) or holds the whole message (recv), and may be used where they lie
// (recv_in_place): no hand-off to the progress thread, which is most of a small message's
// latency. Larger ones stay asynchronous. It covers a recursive-doubling message ([fingerprint |
// up to 64 KiB]) and a ring slice of a 1 MiB all-reduce: with 4 ranks on 2 cores every hand-off
// to the send thread waits for a core, and a 128 KiB limit left the 1 MiB all-reduce at 1.9x
// Open MPI's time (now 1.2x).
inline constexpr std::size_t kShmInlineBytes = 1024 * 1024;

// Receives up to this size are moved by the thread that waits for them (drive_recv): small
// enough to sit whole in the ring, as large as the latency algorithms' buffers. Awaited ones
// (recv_awaited) are, at any size the ring holds whole.
inline constexpr std::size_t kShmWaiterRecvBytes = 256 * 1024;

// The most a joined send's head may hold (try_send_joined): it is copied into the request, so
// the caller's copy may go at once.
inline constexpr std::size_t kShmJoinedHeadMax = 32;

// Thread safety: send/recv/abort may be called from any thread. One progress thread per
// direction serves that direction's requests in posting order; the destructor fails whatever is
// pending (PeerError) and joins them, and never hangs on a dead peer. Host buffers only.
// A small receive is not handed to the progress thread when it is posted: the thread that
// waits for it reads it from the ring itself (no hand-off, most of a small message's latency),
// and only a request given a continuation (then) or stuck behind others goes to the thread.
class ShmConnection : public Connection {
 public:
  // Takes a created or opened segment; the creator's side waits until the peer has mapped it.
  ShmConnection(ShmSegment segment, int local_rank, int peer_rank, core::Deadline deadline,
                const std::string& peer_process = "");
  ~ShmConnection() override;
  ShmConnection(const ShmConnection&) = delete;
  ShmConnection& operator=(const ShmConnection&) = delete;

  RequestPtr send(ConstBuffer buffer) override;
  RequestPtr recv(Buffer buffer) override;
  RequestPtr recv_awaited(Buffer buffer) override;
  RequestPtr try_send_joined(ConstBuffer head, ConstBuffer body) override;
  bool receives_in_place(std::size_t bytes) const override;
  bool recv_in_place(const InPlace& use, std::size_t max_bytes, core::Deadline deadline) override;
  void abort(const std::string& reason) override;

  int local_rank() const override { return local_rank_; }
  int peer_rank() const override { return peer_rank_; }
  const char* transport() const override { return "shm"; }
  std::uint64_t bytes_sent() const override { return bytes_sent_.load(); }
  std::uint64_t bytes_received() const override { return bytes_received_.load(); }
  // Cross-memory attach to the peer process (see shm/peer_memory.h): both sides probed it when
  // they connected and agreed; RINGLET_SHM_CMA=0 turns it off.
  bool can_read_peer() const override { return peer_readable_; }
  void read_peer(void* dst, std::uintptr_t remote, std::size_t bytes) override;
  // Whether this side's sends may go back to their ring's start (ShmRing::rewind_bytes): unless
  // the two sides sat apart when they connected (agree_on_going_back); RINGLET_SHM_GO_BACK=1 or 0
  // decides instead.
  bool goes_back() const { return goes_back_; }

  using Connection::recv;
  using Connection::recv_awaited;
  using Connection::send;

 private:
  struct Op {
    RequestPtr request;
    std::array<std::byte, kShmJoinedHeadMax> head{};  // a joined send's head, before src
    std::size_t head_bytes = 0;
    const std::byte* src = nullptr;  // send
    std::byte* dst = nullptr;        // recv
    std::size_t bytes = 0;
    bool waiter_moves = false;  // a small recv its waiting thread moves (drive_recv)
    bool awaited = false;       // recv_awaited: its waiter moves it at any size the ring holds
  };
  // One direction's queue and progress thread. Once `failed` is set, every queued and later
  // request of this direction fails with `failure`.
  struct Direction {
    std::mutex mutex;
    std::condition_variable cv;
    std::deque<Op> queue;
    std::string failure;
    std::atomic<bool> failed{false};
    bool busy = false;  // the progress thread is moving an op (it owns this end of the ring)
    std::thread thread;
  };
  enum class Step { ok, failed };

  RequestPtr post_recv(Buffer buffer, bool awaited);
  RequestPtr post(Direction& dir, Op op, RequestLabel::Kind kind);
  void send_loop();
  void recv_loop();
  bool next_op(Direction& dir, Op& op);
  void finish_op(Direction& dir);
  // Moves a small op at once if that needs no waiting; the caller holds the direction's mutex
  // and the direction is idle. Returns true if the op completed.
  bool try_send_now(Op& op);
  bool try_recv_now(Op& op);
  // Steps over the skip a sender left to put its next message at the ring's start (a length
  // word with kRewound); true if there was one. The caller owns the ring's read end.
  bool skip_rewind();
  // The readable bytes the next step of a reader that takes messages whole waits for: the
  // length word, or the skip or frame it announces. The caller owns the ring's read end.
  std::size_t whole_frame_bytes();
  // Writes one whole frame (length word, head, body, padding) if it all fits in the ring now;
  // false, nothing written, otherwise. The caller owns the ring's write end.
  bool try_write_frame(ConstBuffer head, ConstBuffer body);
  // Request::Driver of a small receive: moves it on the waiting thread when it is next in line
  // (until `deadline`), else hands the queue to the progress thread.
  void drive_recv(Request* request, const core::Deadline* deadline);
  void hand_back(Op op);
  // Gives the ring's read end, taken by this thread, back to the progress thread.
  void release_recv_end();
  Step write_all(const void* src, std::size_t n, Request* request);
  Step read_all(void* dst, std::size_t n, Request* request);
  // The next message's length word, past any skip before it.
  Step read_length(std::uint64_t& frame);
  bool peer_closed() const;
  // Fails the direction (queued and later requests) with a PeerError built from `why`.
  void fail_direction(Direction& dir, const std::string& why);
  void fail_op(Direction& dir, Op& op);
  void close_local_side();
  // Fails both directions with `why`, joins the progress threads and marks this side closed.
  void close_connection(const std::string& why);
  // The connect-time exchange that sets peer_readable_ (two small messages each way).
  bool agree_on_peer_reads(core::Deadline deadline);
  // The connect-time exchange that sets goes_back_ (a line's round trip, one byte one way).
  bool agree_on_going_back(core::Deadline deadline);
  std::string describe_failure(const std::string& why) const;

  ShmSegment segment_;
  int local_rank_;
  int peer_rank_;
  int side_;  // 0 if this process created the segment
  ShmRing tx_;
  ShmRing rx_;
  ProcessWatch peer_process_;
  bool peer_readable_ = false;
  bool goes_back_ = true;
  std::atomic<std::uint64_t> bytes_sent_{0};
  std::atomic<std::uint64_t> bytes_received_{0};
  Direction send_;
  Direction recv_;
};

// Rendezvous through the store: the lower rank creates the segment and publishes its name under
// prefix + "/shm/<lo>-<hi>", the higher rank reads it and maps the segment; both return once the
// segment is mapped on both sides and its name unlinked (TimeoutError at the deadline). The
// prefix must be unique per connection attempt (e.g. it carries the job token).
// `peer_process` (the peer's process_token(), when known) lets the creator stop waiting at once
// when the peer dies before it maps the segment.
std::unique_ptr<Connection> connect_shm(int local_rank, int peer_rank, Store& store,
                                        const std::string& prefix, core::Deadline deadline,
                                        const std::string& peer_process = "");

// Which host this process is on, for the mesh (pairs on one host talk over shm) and the
// topology collectives choose their algorithm by: RINGLET_HOSTID when set (as NCCL_HOSTID), else
// "hostname/boot-id/net-namespace". Processes in different network namespaces count as different
// hosts, so namespaces joined by a veth pair simulate hosts (bench/simulated_hosts.py).
std::string host_identity();

}  // namespace ringlet::transport
