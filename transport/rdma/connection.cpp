// RdmaConnection's data path: fragments, credits, completions (see connection.h).
#include "transport/rdma/connection.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/copy.h"
#include "core/env.h"
#include "core/error.h"
#include "core/random.h"
#include "core/thread_name.h"

namespace ringlet::transport::rdma {
namespace {

constexpr std::uint32_t kCreditBit = 1u << 31;
constexpr std::uint32_t kLastBit = 1u << 30;
constexpr std::uint32_t kLengthMask = kLastBit - 1;
constexpr std::uint32_t kCreditMask = 0xffff;
// With requests waiting and nothing heard for this long, an empty write checks the peer.
constexpr auto kKeepaliveAfter = std::chrono::milliseconds(200);
constexpr std::size_t kPollBatch = 16;
constexpr std::size_t kMaxQueue = 2 * 1024 + 8;  // 2 * the most slots + control writes

// Receives are posted with this wr_id and writes with 1, 2, ...: an error completion's opcode
// is undefined in verbs, its wr_id is not.
constexpr std::uint64_t kReceiveWrId = 0;
bool is_receive(const WorkCompletion& c) { return c.wr_id == kReceiveWrId; }

// Ranks the errors of one batch: the cause (a write that failed) before its consequences
// (what the QP flushed when it went to error), a flushed write before a flushed receive.
int error_rank(const WorkCompletion& c) {
  if (c.status == WcStatus::success) return 0;
  if (c.status != WcStatus::flushed) return 3;
  return is_receive(c) ? 1 : 2;
}

}  // namespace

RdmaOptions rdma_options_from_env() {
  RdmaOptions options;
  options.slots = static_cast<int>(core::env_int("RINGLET_IB_SLOTS", options.slots, 2, 1024));
  options.slot_bytes = static_cast<std::size_t>(core::env_int(
      "RINGLET_IB_SLOT_BYTES", static_cast<std::int64_t>(options.slot_bytes), 4096, 64 << 20));
  return options;
}

RdmaConnection::RdmaConnection(Context& context, RegistrationCache& registrations, int gid_index,
                               int local_rank, int peer_rank, RdmaOptions options)
    : context_(context),
      registrations_(registrations),
      gid_index_(gid_index),
      local_rank_(local_rank),
      peer_rank_(peer_rank),
      options_(options) {
  RINGLET_CHECK(options.slots >= 2 && options.slots <= 1024 && options.slot_bytes >= 4096 &&
                    options.slot_bytes <= kLengthMask,
                ValueError, "rdma: ", options.slots, " slots of ", options.slot_bytes,
                " bytes (needs 2..1024 slots of 4 KiB..1 GiB)");
  const int queue = 2 * options.slots + 8;  // data fragments, credit returns, keepalives
  cq_ = context.create_cq(2 * queue);
  qp_ = context.create_qp(*cq_, *cq_, QpCaps{queue, queue, gid_index});
  const std::size_t total = static_cast<std::size_t>(options.slots) * options.slot_bytes;
  slots_ = static_cast<std::byte*>(context.allocate(total));
  // The peer never writes the bounce slots: plain page-aligned memory, registered for reads.
  bounce_ = static_cast<std::byte*>(std::aligned_alloc(4096, (total + 4095) / 4096 * 4096));
  RINGLET_CHECK(bounce_ != nullptr, OutOfMemoryError, "rdma: ", total, " bytes of bounce slots");
  slots_mr_ = context.register_memory(slots_, total, true);
  bounce_mr_ = context.register_memory(bounce_, total, false);
  psn_ = static_cast<std::uint32_t>(core::random_u64() & 0xffffff);
  bounce_free_ = options.slots;
}

RdmaConnection::~RdmaConnection() {
  stopping_.store(true);
  if (progress_thread_.joinable()) progress_thread_.join();
  {
    std::lock_guard lock(mutex_);
    fail_all("the connection was closed locally");
  }
  settle();
  qp_.reset();
  cq_.reset();
  slots_mr_.reset();
  bounce_mr_.reset();
  context_.release(slots_);
  std::free(bounce_);
}

RdmaEndpoint RdmaConnection::local_endpoint() const {
  RdmaEndpoint endpoint;
  const PortInfo port = context_.port_info();
  endpoint.qp.qp_num = qp_->qp_num();
  endpoint.qp.psn = psn_;
  endpoint.qp.lid = port.lid;
  endpoint.qp.gid = context_.gid(gid_index_);
  endpoint.qp.mtu_bytes = port.mtu_bytes;
  endpoint.slots_addr = reinterpret_cast<std::uint64_t>(slots_);
  endpoint.slots_rkey = slots_mr_->rkey();
  endpoint.slots = options_.slots;
  endpoint.slot_bytes = options_.slot_bytes;
  return endpoint;
}

void RdmaConnection::connect(const RdmaEndpoint& remote) {
  RINGLET_CHECK(remote.slots == options_.slots && remote.slot_bytes == options_.slot_bytes,
                HandshakeError, "rank ", local_rank_, ": rdma peer rank ", peer_rank_, " uses ",
                remote.slots, " slots of ", remote.slot_bytes, " bytes, this rank ", options_.slots,
                " of ", options_.slot_bytes,
                ": every rank must get the same RINGLET_IB_SLOTS and RINGLET_IB_SLOT_BYTES");
  remote_ = remote;
  qp_->to_init();
  // One receive per fragment the peer may have in our slots and per credit return it may owe.
  for (int i = 0; i < 2 * options_.slots; ++i) qp_->post_recv(kReceiveWrId);
  qp_->to_rtr(remote.qp);
  qp_->to_rts(psn_);
  credits_ = remote.slots;
  last_activity_ = std::chrono::steady_clock::now();
  progress_thread_ = std::thread([this] {
    core::name_this_thread("rl-rdma");
    progress_loop();
  });
}

RequestPtr RdmaConnection::make_request(RequestLabel::Kind kind, std::size_t bytes) {
  auto request =
      std::make_shared<Request>(RequestLabel{kind, local_rank_, peer_rank_, bytes, "rdma"});
  request->set_driver([this, r = request.get()](const core::Deadline* d) { drive(r, d); });
  return request;
}

template <class Enqueue>
void RdmaConnection::post(Enqueue enqueue) {
  {
    std::lock_guard lock(mutex_);
    enqueue();
    if (failed_) {
      fail_pending();  // a receive may still take a message that arrived whole before
    } else {
      progress();
    }
  }
  settle();
}

RequestPtr RdmaConnection::send(ConstBuffer buffer) {
  RINGLET_CHECK(buffer.device.is_cpu(), DeviceError, "rdma: rank ", local_rank_,
                " cannot send device memory (", buffer.device.str(),
                ") yet; stage it in host memory");
  RequestPtr request = make_request(RequestLabel::Kind::send, buffer.bytes);
  count_message();
  SendOp op;
  op.request = request;
  op.data = static_cast<const std::byte*>(buffer.data);
  op.bytes = buffer.bytes;
  if (op.bytes > 0) op.region = registrations_.find(op.data, op.bytes);
  post([&] { sends_.push_back(std::move(op)); });
  return request;
}

RequestPtr RdmaConnection::recv(Buffer buffer) {
  RINGLET_CHECK(buffer.device.is_cpu(), DeviceError, "rdma: rank ", local_rank_,
                " cannot receive into device memory (", buffer.device.str(),
                ") yet; stage it in host memory");
  RequestPtr request = make_request(RequestLabel::Kind::recv, buffer.bytes);
  post([&] {
    recvs_.push_back(RecvOp{request, static_cast<std::byte*>(buffer.data), buffer.bytes, 0});
  });
  return request;
}

void RdmaConnection::abort(const std::string& reason) {
  {
    std::lock_guard lock(mutex_);
    fail_all("aborted: " + reason);
  }
  settle();
}

// --- progress (mutex_ held) ---------------------------------------------------------------------

void RdmaConnection::progress() {
  if (failed_) return discard_completions();
  while (poll_once()) {
  }
  deliver();
  return_credits();
  pump_sends();
  keep_alive();
}

// With requests waiting and nothing heard for a while, an empty write (no immediate: it takes
// no receive) asks the peer's adapter whether the peer's QP is still there; a dead peer or a
// QP in error answers with an error completion, which fails the connection.
void RdmaConnection::keep_alive() {
  const auto now = std::chrono::steady_clock::now();
  if (failed_ || (sends_.empty() && recvs_.empty()) || now - last_activity_ < kKeepaliveAfter ||
      static_cast<int>(in_flight_.size()) >= 2 * options_.slots + 8) {
    return;
  }
  post_control(WriteKind::keepalive, 0);
  last_activity_ = now;
}

// Takes every completion there is (at most a queue's worth per call), then handles them in
// order; when some failed, the connection fails first with the worst of them.
bool RdmaConnection::poll_once() {
  std::vector<WorkCompletion>& completions = polled_;  // kept between calls: no allocation
  if (completions.size() < kPollBatch) completions.resize(kPollBatch);
  std::size_t n = 0;
  while (true) {
    const int got = cq_->poll(completions.data() + n, static_cast<int>(completions.size() - n));
    n += static_cast<std::size_t>(got);
    if (n < completions.size() || completions.size() >= 4 * kMaxQueue) break;
    completions.resize(2 * completions.size());
  }
  // What succeeded before the first error counts; from there the worst error names the failure.
  std::size_t i = 0;
  for (; i < n && !failed_ && completions[i].status == WcStatus::success; ++i)
    handle(completions[i]);
  if (i < n && !failed_) {
    const WorkCompletion* worst = &completions[i];
    for (std::size_t j = i + 1; j < n; ++j) {
      if (error_rank(completions[j]) > error_rank(*worst)) worst = &completions[j];
    }
    peer_failed(core::str(is_receive(*worst) ? "a receive" : "a write",
                          " failed: ", wc_status_name(worst->status),
                          worst->detail.empty() ? "" : " (" + worst->detail + ")"));
  }
  return n > 0 && !failed_;
}

// After a failure the QP flushes what was queued; nobody needs those completions, but left in
// the queue they would keep the progress thread from sleeping.
void RdmaConnection::discard_completions() {
  if (polled_.size() < kPollBatch) polled_.resize(kPollBatch);
  while (cq_->poll(polled_.data(), static_cast<int>(polled_.size())) > 0) {
  }
}

void RdmaConnection::handle(const WorkCompletion& c) {
  last_activity_ = std::chrono::steady_clock::now();
  if (!is_receive(c)) return on_send_completion(c);
  qp_->post_recv(kReceiveWrId);  // the receive this write used, posted again
  if ((c.imm & kCreditBit) != 0) {
    credits_ += static_cast<int>(c.imm & kCreditMask);
    if (credits_ > remote_.slots)
      fail_all("protocol violation: the peer returned more credits than slots");
    return;
  }
  on_fragment(c.imm);
}

void RdmaConnection::on_send_completion(const WorkCompletion& /*completion*/) {
  if (in_flight_.empty()) return fail_all("a write completed that was never posted");
  const InFlight done = in_flight_.front();
  in_flight_.pop_front();
  if (done.kind != WriteKind::data) return;
  if (done.bounce >= 0) ++bounce_free_;
  for (SendOp& op : sends_) {  // the oldest message with fragments in flight owns this one
    if (op.in_flight == 0) continue;
    --op.in_flight;
    op.completed += done.bytes;
    op.request->add_bytes(done.bytes);
    bytes_sent_ += done.bytes;
    break;
  }
  complete_sends();
}

void RdmaConnection::complete_sends() {
  while (!sends_.empty()) {
    const SendOp& op = sends_.front();
    if (!op.started || op.posted < op.bytes || op.in_flight > 0) return;
    done_.push_back(op.request);
    sends_.pop_front();
    if (post_cursor_ > 0) --post_cursor_;
  }
}

void RdmaConnection::on_fragment(std::uint32_t imm) {
  const std::uint32_t bytes = imm & kLengthMask;
  if (bytes > options_.slot_bytes) {
    return fail_all(core::str("protocol violation: a fragment of ", bytes, " bytes for slots of ",
                              options_.slot_bytes));
  }
  const auto slot = static_cast<std::uint32_t>(next_local_slot_++ % options_.slots);
  arrived_.push_back(Fragment{slot, bytes, (imm & kLastBit) != 0});
}

// Copies arrived fragments into the posted receives, in order. After the peer's side failed,
// only messages that arrived whole (see peer_failed).
void RdmaConnection::deliver() {
  while (!arrived_.empty() && !recvs_.empty() &&
         (!failed_ || (peer_failed_ && whole_message_arrived()))) {
    const Fragment fragment = arrived_.front();
    RecvOp& op = recvs_.front();
    if (fragment.bytes > op.capacity - op.received) {
      return fail_all(core::str("the peer sent a message longer than the ", op.capacity,
                                "-byte receive posted for it"));
    }
    if (fragment.bytes > 0) {  // an empty receive may have no buffer at all
      core::copy(op.data + op.received,
                 slots_ + static_cast<std::size_t>(fragment.slot) * options_.slot_bytes,
                 fragment.bytes);
    }
    op.received += fragment.bytes;
    op.request->add_bytes(fragment.bytes);
    bytes_received_ += fragment.bytes;
    arrived_.pop_front();
    ++credits_to_return_;
    if (fragment.last) {
      done_.push_back(op.request);
      recvs_.pop_front();
    }
  }
}

// Credits go back in batches of half the slots (or all of them once nothing is left to copy),
// so a stream of small messages costs the peer one extra completion per few messages.
void RdmaConnection::return_credits() {
  const int batch = std::max(1, options_.slots / 2);
  if (credits_to_return_ == 0 || (credits_to_return_ < batch && !arrived_.empty())) return;
  if (static_cast<int>(in_flight_.size()) >= 2 * options_.slots + 8) return;
  post_control(WriteKind::credits, kCreditBit | static_cast<std::uint32_t>(credits_to_return_));
  credits_to_return_ = 0;
}

void RdmaConnection::pump_sends() {
  const int max_in_flight = 2 * options_.slots;
  while (!failed_ && post_cursor_ < sends_.size()) {
    SendOp& op = sends_[post_cursor_];
    if (op.started && op.posted == op.bytes) {
      ++post_cursor_;
      continue;
    }
    const bool needs_bounce = !op.region && op.bytes > 0;
    if (credits_ == 0 || static_cast<int>(in_flight_.size()) >= max_in_flight ||
        (needs_bounce && bounce_free_ == 0)) {
      return;
    }
    post_fragment(op);
  }
}

void RdmaConnection::post_fragment(SendOp& op) {
  const std::size_t n = std::min<std::size_t>(remote_.slot_bytes, op.bytes - op.posted);
  WriteRequest write;
  write.wr_id = next_wr_id_++;
  write.bytes = n;
  InFlight flight{WriteKind::data, -1, static_cast<std::uint32_t>(n)};
  if (n == 0) {  // an empty message: nothing to read
    write.local = bounce_;
    write.lkey = bounce_mr_->lkey();
  } else if (op.region) {
    write.local = op.data + op.posted;
    write.lkey = op.region->lkey();
    zero_copy_bytes_ += n;
  } else {
    flight.bounce = static_cast<int>(next_bounce_++ % options_.slots);
    std::byte* bounce = bounce_ + static_cast<std::size_t>(flight.bounce) * options_.slot_bytes;
    core::copy(bounce, op.data + op.posted, n);
    write.local = bounce;
    write.lkey = bounce_mr_->lkey();
    --bounce_free_;
  }
  const auto slot = next_remote_slot_++ % static_cast<std::uint64_t>(remote_.slots);
  write.remote_addr = remote_.slots_addr + slot * remote_.slot_bytes;
  write.rkey = remote_.slots_rkey;
  write.with_imm = true;
  const bool last = op.posted + n == op.bytes;
  write.imm = static_cast<std::uint32_t>(n) | (last ? kLastBit : 0);
  in_flight_.push_back(flight);
  op.posted += n;
  op.started = true;
  ++op.in_flight;
  --credits_;
  try {
    qp_->post_write(write);
  } catch (const core::Error& e) {
    fail_all(core::str("posting a write: ", e.what()));
  }
}

void RdmaConnection::post_control(WriteKind kind, std::uint32_t imm) {
  WriteRequest write;
  write.wr_id = next_wr_id_++;
  write.local = bounce_;
  write.lkey = bounce_mr_->lkey();
  write.remote_addr = remote_.slots_addr;
  write.rkey = remote_.slots_rkey;
  write.with_imm = kind == WriteKind::credits;
  write.imm = imm;
  in_flight_.push_back(InFlight{kind, -1, 0});
  try {
    qp_->post_write(write);
  } catch (const core::Error& e) {
    fail_all(core::str("posting a write: ", e.what()));
  }
}

void RdmaConnection::fail_all(const std::string& why) {
  if (failed_) return;
  failed_ = true;
  failure_ = describe_failure(why);
  fail_pending();
  try {
    qp_->to_error();  // the peer's next write fails too, so it learns at once
  } catch (const core::Error&) {
  }
}

// A failed completion: the peer's QP is gone or in error. Its writes that landed before are
// whole and in order, so the messages that arrived whole still go to the receives posted now
// (fail_all's fail_pending) and later (post); a receive that needs more fails.
void RdmaConnection::peer_failed(const std::string& why) {
  peer_failed_ = true;
  fail_all(why);
}

// The front receive's message ends in the fragments that arrived.
bool RdmaConnection::whole_message_arrived() const {
  for (const Fragment& fragment : arrived_) {
    if (fragment.last) return true;
  }
  return false;
}

// Fails every queued request (mutex_ held, the connection failed) but the receives that take
// whole messages that arrived before a failure of the peer's side.
void RdmaConnection::fail_pending() {
  deliver();
  for (SendOp& op : sends_) failed_requests_.push_back(op.request);
  for (RecvOp& op : recvs_) failed_requests_.push_back(op.request);
  sends_.clear();
  recvs_.clear();
  post_cursor_ = 0;
}

std::string RdmaConnection::describe_failure(const std::string& why) const {
  return core::str("rank ", local_rank_, ": rdma connection with peer rank ", peer_rank_,
                   " failed: ", why, " (", bytes_sent_.load(), " bytes sent, ",
                   bytes_received_.load(), " bytes received)");
}

// --- threads --------------------------------------------------------------------------------

void RdmaConnection::settle() {
  std::vector<RequestPtr> done;
  std::vector<RequestPtr> failed;
  std::string failure;
  {
    std::lock_guard lock(mutex_);
    done.swap(done_);
    failed.swap(failed_requests_);
    failure = failure_;
  }
  for (const RequestPtr& r : done) r->complete();
  for (const RequestPtr& r : failed) r->fail(std::make_exception_ptr(core::PeerError(failure)));
}

void RdmaConnection::drive(Request* request, const core::Deadline* deadline) {
  if (deadline == nullptr) return;  // a continuation: the progress thread moves it
  ++drivers_;
  while (!request->done() && !deadline->expired()) {
    {
      std::lock_guard lock(mutex_);
      progress();
    }
    settle();
    if (request->done()) break;
    cq_->wait(std::min<std::chrono::microseconds>(
        std::chrono::duration_cast<std::chrono::microseconds>(deadline->remaining()),
        std::chrono::milliseconds(1)));
  }
  --drivers_;
}

void RdmaConnection::progress_loop() {
  while (!stopping_.load()) {
    if (drivers_.load() > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    } else {
      cq_->wait(std::chrono::milliseconds(1));
    }
    {
      std::lock_guard lock(mutex_);
      progress();
    }
    settle();
  }
}

}  // namespace ringlet::transport::rdma
