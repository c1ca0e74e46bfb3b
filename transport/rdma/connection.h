// RdmaConnection: the Connection over one reliable-connected queue pair (verbs.h).
//
// Protocol. Each side registers `slots` receive slots of `slot_bytes` that the peer may write,
// and tells the peer their address and rkey. A message is cut into fragments of at most
// slot_bytes; each is one RDMA write with immediate into the peer's next slot (round robin),
// the immediate carrying its length and whether it ends the message. A sender may have as many
// fragments unconsumed at the peer as it holds credits (initially `slots`); the receiver, once
// it copied fragments out into posted receives, returns their credits in a write with
// immediate of no bytes. So a slow reader is never overrun: the sender waits for credits.
// Fragments of one message are written back to back, up to the credits, so large messages
// pipeline: the peer copies out one slot while the next is being written.
//
// Sends come from a registered region when the caller's buffer lies in one
// (RegistrationCache: zero copy), else from bounce slots. Completions are polled by the thread
// that waits for a request (Request::set_driver) and by the connection's progress thread (for
// continuations, credits and liveness): both take the one mutex. The progress thread also
// writes an empty keepalive when requests wait and nothing moved for a while, so a dead peer
// or a peer QP in error fails the connection within about a second even when this side only
// receives. Any error completion fails every pending and later request with a PeerError naming
// local rank, peer rank, the verbs status and the bytes moved; but what the peer wrote before it
// failed or closed (a rank that finished its last op and went) is whole and in order, so a receive
// posted before or after the failure still gets a message that had arrived whole.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/deadline.h"
#include "transport/connection.h"
#include "transport/rdma/device.h"
#include "transport/rdma/registration_cache.h"
#include "transport/rdma/verbs.h"

namespace ringlet::transport {
class Store;
}

namespace ringlet::transport::rdma {

struct RdmaOptions {
  int slots = 8;                        // RINGLET_IB_SLOTS
  std::size_t slot_bytes = 512 * 1024;  // RINGLET_IB_SLOT_BYTES
};

// Reads RINGLET_IB_SLOTS (2..1024) and RINGLET_IB_SLOT_BYTES (4 KiB..64 MiB).
RdmaOptions rdma_options_from_env();

// What one side tells the other to connect: its QP endpoint and its receive slots.
struct RdmaEndpoint {
  QpEndpoint qp;
  std::uint64_t slots_addr = 0;
  std::uint32_t slots_rkey = 0;
  int slots = 0;
  std::uint64_t slot_bytes = 0;
};
std::string encode_endpoint(const RdmaEndpoint& endpoint);
// Throws HandshakeError naming `peer_rank` on a malformed record.
RdmaEndpoint decode_endpoint(const std::string& text, int peer_rank);

class RdmaConnection : public Connection {
 public:
  // Creates the queue pair and the slots (not yet connected).
  RdmaConnection(Context& context, RegistrationCache& registrations, int gid_index, int local_rank,
                 int peer_rank, RdmaOptions options);
  ~RdmaConnection() override;
  RdmaConnection(const RdmaConnection&) = delete;
  RdmaConnection& operator=(const RdmaConnection&) = delete;

  RdmaEndpoint local_endpoint() const;
  // INIT -> RTR -> RTS against the peer's endpoint, receives posted; then the progress thread
  // starts. The peer must be at least RTR before either side writes (connect_rdma orders that).
  void connect(const RdmaEndpoint& remote);

  RequestPtr send(ConstBuffer buffer) override;
  RequestPtr recv(Buffer buffer) override;
  void abort(const std::string& reason) override;

  int local_rank() const override { return local_rank_; }
  int peer_rank() const override { return peer_rank_; }
  const char* transport() const override { return "rdma"; }
  std::uint64_t bytes_sent() const override { return bytes_sent_.load(); }
  std::uint64_t bytes_received() const override { return bytes_received_.load(); }
  std::size_t preferred_slice_bytes() const override { return options_.slot_bytes; }

  // Bytes sent straight from a registered caller buffer (no bounce copy).
  std::uint64_t zero_copy_bytes() const { return zero_copy_bytes_.load(); }

  using Connection::recv;
  using Connection::send;

 private:
  struct SendOp {
    RequestPtr request;
    const std::byte* data = nullptr;
    std::size_t bytes = 0;
    std::size_t posted = 0;                      // bytes handed to the QP
    std::size_t completed = 0;                   // bytes whose writes completed
    bool started = false;                        // a fragment was posted (an empty message has one)
    int in_flight = 0;                           // fragments posted and not yet completed
    std::shared_ptr<const MemoryRegion> region;  // a registered caller buffer: zero copy
  };
  struct RecvOp {
    RequestPtr request;
    std::byte* data = nullptr;
    std::size_t capacity = 0;
    std::size_t received = 0;
  };
  struct Fragment {
    std::uint32_t slot = 0;
    std::uint32_t bytes = 0;
    bool last = false;
  };
  enum class WriteKind : std::uint8_t { data, credits, keepalive };
  struct InFlight {
    WriteKind kind = WriteKind::data;
    int bounce = -1;  // bounce slot, or -1
    std::uint32_t bytes = 0;
  };

  // A request that the waiting thread drives (drive()).
  RequestPtr make_request(RequestLabel::Kind kind, std::size_t bytes);
  // Queues a request's op (enqueue(), under the mutex) and progresses; when the connection
  // already failed, fails the request at once (a receive may take a message that arrived whole).
  template <class Enqueue>
  void post(Enqueue enqueue);
  // Everything below runs with mutex_ held.
  void progress();
  bool poll_once();
  void discard_completions();
  void handle(const WorkCompletion& completion);
  void on_send_completion(const WorkCompletion& completion);
  void on_fragment(std::uint32_t imm);
  void deliver();
  void return_credits();
  void pump_sends();
  void post_fragment(SendOp& op);
  void post_control(WriteKind kind, std::uint32_t imm);
  void keep_alive();
  void complete_sends();
  void fail_all(const std::string& why);
  void peer_failed(const std::string& why);
  bool whole_message_arrived() const;
  void fail_pending();
  std::string describe_failure(const std::string& why) const;
  // Without mutex_: completes and fails the requests progress() finished.
  void settle();
  // The request driver: the waiting thread polls until `request` is done or the deadline.
  void drive(Request* request, const core::Deadline* deadline);
  void progress_loop();

  Context& context_;
  RegistrationCache& registrations_;
  int gid_index_;
  int local_rank_;
  int peer_rank_;
  RdmaOptions options_;
  std::unique_ptr<CompletionQueue> cq_;
  std::unique_ptr<QueuePair> qp_;
  std::byte* slots_ = nullptr;   // receive slots (allocate()d)
  std::byte* bounce_ = nullptr;  // send bounce slots
  std::unique_ptr<MemoryRegion> slots_mr_;
  std::unique_ptr<MemoryRegion> bounce_mr_;
  std::uint32_t psn_ = 0;
  RdmaEndpoint remote_{};

  mutable std::mutex mutex_;
  std::deque<SendOp> sends_;
  std::size_t post_cursor_ = 0;  // sends_[post_cursor_] is the first not fully posted
  std::deque<RecvOp> recvs_;
  std::deque<Fragment> arrived_;
  std::deque<InFlight> in_flight_;
  std::vector<WorkCompletion> polled_;  // poll_once's buffer
  int credits_ = 0;
  int credits_to_return_ = 0;
  int bounce_free_ = 0;
  std::uint64_t next_remote_slot_ = 0;
  std::uint64_t next_local_slot_ = 0;
  std::uint64_t next_bounce_ = 0;
  std::uint64_t next_wr_id_ = 1;
  std::chrono::steady_clock::time_point last_activity_;
  bool failed_ = false;
  bool peer_failed_ = false;  // failed by the peer's side: what arrived whole is still delivered
  std::string failure_;
  std::vector<RequestPtr> done_;             // finished, to complete outside the mutex
  std::vector<RequestPtr> failed_requests_;  // to fail with failure_ outside the mutex

  std::atomic<bool> stopping_{false};
  std::atomic<int> drivers_{0};  // threads driving a request (the progress thread then naps)
  std::atomic<std::uint64_t> bytes_sent_{0};
  std::atomic<std::uint64_t> bytes_received_{0};
  std::atomic<std::uint64_t> zero_copy_bytes_{0};
  std::thread progress_thread_;
};

// Rendezvous through the store: both sides create their QP and slots, publish their endpoint
// under prefix + "/rdma/<from>-<to>", connect to the other's, and wait until the other reached
// RTR before returning (TimeoutError naming the peer at the deadline).
std::unique_ptr<Connection> connect_rdma(RdmaDevice& device, int local_rank, int peer_rank,
                                         Store& store, const std::string& prefix,
                                         core::Deadline deadline);

}  // namespace ringlet::transport::rdma
