// ShmConnection and the shm rendezvous. Invariants: ring i carries the messages of side i
// (side 0 = the creator, the lower rank); a side sets its closed flag only after its sender has
// stopped publishing, so a reader that sees the flag and an empty ring knows nothing more comes;
// a request's buffer is touched only by the thread moving it (its direction's progress thread,
// or for a small receive the thread waiting for it), which is also the one that fails the
// request it is working on, so a failed request's buffer is free at once. `busy` marks the
// direction's ring end as taken; a thread takes it only from the queue's front.
#include "transport/shm/connection.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>
#include <utility>

#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "core/thread_name.h"
#include "transport/errors.h"
#include "transport/shm/line_round_trip.h"
#include "transport/shm/peer_memory.h"
#include "transport/store.h"

namespace ringlet::transport {
namespace {

// How long a progress thread sleeps between peer-liveness checks when its ring stays idle. A
// write or a close wakes it at once; only a killed peer is noticed at this granularity.
constexpr auto kSlice = std::chrono::microseconds(20000);
constexpr std::size_t kInlineBytes = kShmInlineBytes;
constexpr std::size_t kWaiterRecvBytes = kShmWaiterRecvBytes;
// Receives at least this large are copied out with streaming stores (see ShmRing::read_some):
// past the last-level cache share of a core, keeping the destination cached buys nothing.
constexpr std::size_t kStreamingBytes = 8 << 20;

// Every frame (length word, payload, padding) is a whole number of these, so each payload starts
// aligned for any element type wherever the messages before it ended.
constexpr std::size_t kFrameAlign = sizeof(std::uint64_t);
constexpr std::uint64_t kPadding = 0;  // the source of up to kFrameAlign - 1 zero bytes

// The padding after a payload of n bytes.
constexpr std::size_t padding_after(std::size_t n) {
  return (kFrameAlign - n % kFrameAlign) % kFrameAlign;
}
// Ring bytes of a whole frame with a payload of n bytes.
constexpr std::size_t frame_bytes(std::size_t n) {
  return sizeof(std::uint64_t) + n + padding_after(n);
}
static_assert(sizeof kPadding >= kFrameAlign - 1);
// A length word with this bit is no message: the sender skipped the rest of the ring, the word's
// other bits' worth of bytes, to put its next message at the ring's start (ShmRing::rewind_bytes).
constexpr std::uint64_t kRewound = std::uint64_t{1} << 63;

}  // namespace

// ---- ShmConnection ----

ShmConnection::ShmConnection(ShmSegment segment, int local_rank, int peer_rank,
                             core::Deadline deadline, const std::string& peer_process)
    : segment_(std::move(segment)),
      local_rank_(local_rank),
      peer_rank_(peer_rank),
      side_(segment_.creator() ? 0 : 1) {
  if (segment_.creator()) segment_.wait_attached(local_rank_, peer_rank_, deadline, peer_process);
  tx_ = segment_.ring(side_);
  rx_ = segment_.ring(1 - side_);
  peer_process_ = ProcessWatch(segment_.pid(1 - side_));
  send_.thread = std::thread([this] {
    core::name_this_thread("rl-shm-send");
    send_loop();
  });
  try {
    recv_.thread = std::thread([this] {
      core::name_this_thread("rl-shm-recv");
      recv_loop();
    });
  } catch (...) {
    fail_direction(send_, "could not start a progress thread");
    send_.thread.join();
    throw;
  }
  try {
    goes_back_ = agree_on_going_back(deadline);
    tx_.set_going_back(goes_back_);
    peer_readable_ = agree_on_peer_reads(deadline);
  } catch (...) {  // a bad setting, a silent or dead peer: no destructor runs to stop the threads
    close_connection("the connection failed while connecting");
    throw;
  }
  core::log(core::LogLevel::debug, "rank ", local_rank_, ": shm connection to rank ", peer_rank_,
            " (rings of ", segment_.ring_bytes(), " bytes, peer pid ", peer_process_.pid(),
            peer_readable_ ? ", cross-memory attach" : "",
            goes_back_ ? "" : ", sends never go back to the ring's start", ")");
}

// Side 0 times a line of the segment bounced between the two connecting threads and sends
// whether they sat apart: a round trip over kApartNs, which two cores sharing a cache do not
// take (40-170 ns where they do, 340-570 where not, on the 2-vCPU machines of
// core/cpu_round_trip.h and bench/RESULTS.md, 2026-12-05 "Apart, never back"). NaN, a side that
// did not answer (the two took turns on one CPU), counts as near. RINGLET_SHM_GO_BACK=1 or 0
// overrides the outcome for this side's sends.
bool ShmConnection::agree_on_going_back(core::Deadline deadline) {
  constexpr double kApartNs = 250;
  const std::string wanted = core::env_string("RINGLET_SHM_GO_BACK").value_or("auto");
  RINGLET_CHECK(wanted == "auto" || wanted == "1" || wanted == "0", ValueError,
                "environment variable RINGLET_SHM_GO_BACK=", wanted, " is not auto, 1 or 0");
  const double ns = line_round_trip_ns(segment_.round_trip_line(), side_);
  std::uint8_t apart = side_ == 0 && ns > kApartNs ? 1 : 0;
  if (side_ == 0) {
    core::log(core::LogLevel::debug, "rank ", local_rank_, ": shm connection to rank ", peer_rank_,
              ": a line's round trip ", ns, " ns", apart != 0 ? " (apart)" : "");
  }
  RequestPtr verdict = side_ == 0 ? send(&apart, 1) : recv(&apart, 1);
  verdict->wait(deadline);
  return wanted == "auto" ? apart == 0 : wanted == "1";
}

// Each side sends the address of its probe word and whether it wants cross-memory reads, reads
// the peer's word, and sends the outcome; reads are on only if both succeeded. The exchange is
// part of connecting: the byte counters start after it.
bool ShmConnection::agree_on_peer_reads(core::Deadline deadline) {
  const std::uint64_t wanted = core::env_int("RINGLET_SHM_CMA", 1, 0, 1);
  const std::uint64_t mine[2] = {peer_memory_probe_address(), wanted};
  std::uint64_t theirs[2] = {};
  RequestPtr sent = send(mine, sizeof mine);
  RequestPtr got = recv(theirs, sizeof theirs);
  sent->wait(deadline);
  got->wait(deadline);
  const std::uint8_t ok =
      wanted != 0 && theirs[1] != 0 && probe_peer_memory(peer_process_.pid(), theirs[0]) ? 1 : 0;
  std::uint8_t peer_ok = 0;
  sent = send(&ok, 1);
  got = recv(&peer_ok, 1);
  sent->wait(deadline);
  got->wait(deadline);
  bytes_sent_ = 0;
  bytes_received_ = 0;
  return ok == 1 && peer_ok == 1;
}

void ShmConnection::read_peer(void* dst, std::uintptr_t remote, std::size_t bytes) {
  RINGLET_CHECK(peer_readable_, Error, "rank ", local_rank_, ": the shm connection to rank ",
                peer_rank_, " has no cross-memory attach (RINGLET_SHM_CMA=0, or not permitted)");
  if (const int error = read_peer_memory(peer_process_.pid(), dst, remote, bytes); error != 0) {
    throw PeerError(describe_failure(
        core::str("reading ", bytes, " bytes of its memory failed: ", core::errno_text(error),
                  peer_process_.exited() ? " (the peer process exited)" : "")));
  }
  bytes_received_ += bytes;
}

ShmConnection::~ShmConnection() { close_connection("the connection was closed locally"); }

void ShmConnection::close_connection(const std::string& why) {
  fail_direction(send_, why);
  fail_direction(recv_, why);
  tx_.wake_all();  // our own threads may sleep on these words
  rx_.wake_all();
  send_.thread.join();
  recv_.thread.join();
  close_local_side();  // after the join: whatever our sender published stays readable
}

RequestPtr ShmConnection::send(ConstBuffer buffer) {
  RINGLET_CHECK(buffer.device.is_cpu(), DeviceError, "rank ", local_rank_, ": shm send to rank ",
                peer_rank_, " needs a host buffer, got ", buffer.device);
  RINGLET_CHECK(buffer.data != nullptr || buffer.bytes == 0, ValueError, "rank ", local_rank_,
                ": shm send to rank ", peer_rank_, " of ", buffer.bytes, " bytes from nullptr");
  Op op;
  op.src = static_cast<const std::byte*>(buffer.data);
  op.bytes = buffer.bytes;
  count_message();
  return post(send_, std::move(op), RequestLabel::Kind::send);
}

// Always taken (a host head that fits the request): at once where post can, else queued as any
// send, its head in the request and its body the caller's until it completes.
RequestPtr ShmConnection::try_send_joined(ConstBuffer head, ConstBuffer body) {
  if (!head.device.is_cpu() || !body.device.is_cpu() || head.bytes > kShmJoinedHeadMax ||
      (body.data == nullptr && body.bytes > 0)) {
    return nullptr;
  }
  Op op;
  if (head.bytes > 0) std::memcpy(op.head.data(), head.data, head.bytes);
  op.head_bytes = head.bytes;
  op.src = static_cast<const std::byte*>(body.data);
  op.bytes = body.bytes;
  count_message();
  return post(send_, std::move(op), RequestLabel::Kind::send);
}

bool ShmConnection::receives_in_place(std::size_t bytes) const { return bytes <= kInlineBytes; }

RequestPtr ShmConnection::recv(Buffer buffer) { return post_recv(buffer, false); }

// The pipeline's only slice (the ring's steps of a 1 MiB all-reduce on 2 ranks: 512 KiB): its
// waiter reads it, which saves the progress thread's two wake-ups.
RequestPtr ShmConnection::recv_awaited(Buffer buffer) { return post_recv(buffer, true); }

RequestPtr ShmConnection::post_recv(Buffer buffer, bool awaited) {
  RINGLET_CHECK(buffer.device.is_cpu(), DeviceError, "rank ", local_rank_, ": shm recv from rank ",
                peer_rank_, " needs a host buffer, got ", buffer.device);
  RINGLET_CHECK(buffer.data != nullptr || buffer.bytes == 0, ValueError, "rank ", local_rank_,
                ": shm recv from rank ", peer_rank_, " of ", buffer.bytes, " bytes into nullptr");
  Op op;
  op.dst = static_cast<std::byte*>(buffer.data);
  op.bytes = buffer.bytes;
  op.awaited = awaited;
  return post(recv_, std::move(op), RequestLabel::Kind::recv);
}

void ShmConnection::abort(const std::string& reason) {
  fail_direction(send_, "aborted: " + reason);
  fail_direction(recv_, "aborted: " + reason);
  close_local_side();
}

RequestPtr ShmConnection::post(Direction& dir, Op op, RequestLabel::Kind kind) {
  const std::size_t bytes = op.head_bytes + op.bytes;
  auto request =
      std::make_shared<Request>(RequestLabel{kind, local_rank_, peer_rank_, bytes, "shm"});
  op.request = request;
  std::string failure;
  {
    std::lock_guard lock(dir.mutex);
    if (!dir.failed.load(std::memory_order_relaxed)) {
      // With nothing queued and the progress thread idle, this thread may use the ring end (the
      // mutex orders its use with the thread's), and order is kept.
      if (dir.queue.empty() && !dir.busy && bytes <= kInlineBytes &&
          (&dir == &send_ ? try_send_now(op) : try_recv_now(op))) {
        return request;
      }
      // Its waiter moves it (no wake-up) once the whole message is in the ring, so it must fit.
      if (&dir == &recv_ && (op.bytes <= kWaiterRecvBytes || op.awaited) &&
          op.bytes + sizeof(std::uint64_t) <= segment_.ring_bytes()) {
        request->set_driver(
            [this, r = request.get()](const core::Deadline* d) { drive_recv(r, d); });
        op.waiter_moves = true;
        dir.queue.push_back(std::move(op));
        return request;
      }
      dir.queue.push_back(std::move(op));
      dir.cv.notify_one();
      return request;
    }
    failure = dir.failure;
  }
  request->fail(std::make_exception_ptr(PeerError(failure)));
  return request;
}

bool ShmConnection::next_op(Direction& dir, Op& op) {
  std::unique_lock lock(dir.mutex);
  // Ended by a failure, an abort or the destructor (all set `failed` and notify).
  dir.cv.wait(lock, [&] {
    return dir.failed.load(std::memory_order_relaxed) || (!dir.queue.empty() && !dir.busy);
  });
  if (dir.failed.load(std::memory_order_relaxed)) return false;
  op = std::move(dir.queue.front());
  dir.queue.pop_front();
  dir.busy = true;
  return true;
}

void ShmConnection::finish_op(Direction& dir) {
  std::lock_guard lock(dir.mutex);
  dir.busy = false;
}

bool ShmConnection::try_send_now(Op& op) {
  if (peer_closed()) return false;  // the progress thread reports it
  if (!try_write_frame({op.head.data(), op.head_bytes}, {op.src, op.bytes})) return false;
  op.request->add_bytes(op.head_bytes + op.bytes);
  bytes_sent_ += op.head_bytes + op.bytes;
  op.request->complete();
  return true;
}

bool ShmConnection::try_write_frame(ConstBuffer head, ConstBuffer body) {
  const std::uint64_t frame = head.bytes + body.bytes;
  const std::size_t rewind = tx_.rewind_bytes(frame_bytes(frame));  // 0: no skip
  const std::size_t skipped = rewind > 0 ? rewind - sizeof(std::uint64_t) : 0;
  const std::uint64_t skip = kRewound | skipped;
  return tx_.try_write_all({{&skip, rewind > 0 ? sizeof skip : 0},
                            {nullptr, skipped},
                            {&frame, sizeof frame},
                            {head.data, head.bytes},
                            {body.data, body.bytes},
                            {&kPadding, padding_after(frame)}});
}

bool ShmConnection::skip_rewind() {
  std::uint64_t frame = 0;
  if (rx_.peek(&frame, sizeof frame) < sizeof frame || (frame & kRewound) == 0) return false;
  // Published with the length word; one that does not end at the ring's end is a length no
  // receive holds, which the caller reports.
  return rx_.skip_to_start(sizeof frame + (frame & ~kRewound));
}

std::size_t ShmConnection::whole_frame_bytes() {
  std::uint64_t frame = 0;
  if (rx_.peek(&frame, sizeof frame) < sizeof frame) return sizeof frame;
  if ((frame & kRewound) != 0) return sizeof frame + (frame & ~kRewound);
  return frame_bytes(frame);
}

bool ShmConnection::try_recv_now(Op& op) {
  skip_rewind();
  std::uint64_t frame = 0;
  if (rx_.peek(&frame, sizeof frame) < sizeof frame || frame > op.bytes ||
      rx_.readable() < frame_bytes(frame)) {
    return false;  // not all there yet, or too long (the progress thread reports that)
  }
  rx_.read_some(&frame, sizeof frame);
  for (std::size_t done = 0; done < frame;) done += rx_.read_some(op.dst + done, frame - done);
  if (const std::size_t pad = padding_after(frame); pad > 0) rx_.consume(pad);
  op.request->add_bytes(frame);
  bytes_received_ += frame;
  op.request->complete();
  return true;
}

void ShmConnection::drive_recv(Request* request, const core::Deadline* deadline) {
  Op op;
  {
    std::unique_lock lock(recv_.mutex);
    const bool next = !recv_.failed.load(std::memory_order_relaxed) && !recv_.busy &&
                      !recv_.queue.empty() && recv_.queue.front().request.get() == request;
    if (!next || deadline == nullptr) {  // the progress thread takes the queue from here
      lock.unlock();
      recv_.cv.notify_all();
      return;
    }
    op = std::move(recv_.queue.front());
    recv_.queue.pop_front();
    recv_.busy = true;
  }
  while (true) {
    if (recv_.failed.load(std::memory_order_acquire)) {
      fail_op(recv_, op);
      finish_op(recv_);
      return;
    }
    if (try_recv_now(op)) break;
    // Anything but "not there yet" (a message too long, a closed or dead peer) and the end of
    // the wait are the progress thread's to handle and report.
    std::uint64_t frame = 0;
    const bool too_long =
        !skip_rewind() && rx_.peek(&frame, sizeof frame) == sizeof frame && frame > op.bytes;
    if (too_long || peer_closed() || deadline->expired()) return hand_back(std::move(op));
    const auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline->remaining());
    if (!rx_.wait_readable(std::min<std::chrono::microseconds>(kSlice, left),
                           whole_frame_bytes()) &&
        peer_process_.exited()) {
      return hand_back(std::move(op));
    }
  }
  release_recv_end();
}

bool ShmConnection::recv_in_place(const InPlace& use, std::size_t max_bytes,
                                  core::Deadline deadline) {
  {
    std::lock_guard lock(recv_.mutex);
    if (recv_.failed.load(std::memory_order_relaxed) || !recv_.queue.empty() || recv_.busy) {
      return false;
    }
    recv_.busy = true;  // this thread has the ring's read end, as drive_recv
  }
  struct Release {
    ShmConnection* c;
    ~Release() { c->release_recv_end(); }
  } release{this};
  while (!recv_.failed.load(std::memory_order_acquire)) {
    std::uint64_t frame = 0;
    skip_rewind();
    if (rx_.peek(&frame, sizeof frame) == sizeof frame) {
      // Longer than allowed, or than the ring: it can never lie there whole.
      if (frame > max_bytes || frame_bytes(frame) > rx_.capacity()) return false;
      if (rx_.readable() >= frame_bytes(frame)) {
        const std::byte* message = rx_.view(sizeof frame, frame);
        if (message == nullptr) return false;  // it wraps round the ring's end
        if (!use(message, frame)) return false;
        rx_.consume(frame_bytes(frame));
        bytes_received_ += frame;
        return true;
      }
    }
    if (peer_closed() || deadline.expired()) return false;
    const auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline.remaining());
    if (!rx_.wait_readable(std::min<std::chrono::microseconds>(kSlice, left),
                           whole_frame_bytes()) &&
        peer_process_.exited()) {
      return false;
    }
  }
  return false;
}

// The waiting thread is done with the ring's end. The progress thread is woken only for an op
// it must move itself. Queued recvs that their own waiters move (the ring's next slice after
// the fingerprint) are left to them: each waiter drives its recv, or, waiting for one that is not
// next, wakes the progress thread then (drive_recv). Woken here, it raced the waiter for the
// next recv and then had to wake it, twice a step.
void ShmConnection::release_recv_end() {
  bool progress;
  {
    std::lock_guard lock(recv_.mutex);
    recv_.busy = false;
    progress = std::any_of(recv_.queue.begin(), recv_.queue.end(),
                           [](const Op& op) { return !op.waiter_moves; });
  }
  if (progress) recv_.cv.notify_all();
}

// Puts an op the waiting thread could not finish back at the front, for the progress thread.
void ShmConnection::hand_back(Op op) {
  {
    std::lock_guard lock(recv_.mutex);
    recv_.busy = false;
    if (!recv_.failed.load(std::memory_order_relaxed)) {
      recv_.queue.push_front(std::move(op));
      op = Op{};
    }
  }
  recv_.cv.notify_all();
  if (op.request) fail_op(recv_, op);  // the direction failed meanwhile
}

void ShmConnection::send_loop() {
  Op op;
  while (next_op(send_, op)) {
    if (peer_closed()) fail_direction(send_, "the peer closed the connection");
    const std::uint64_t frame = op.head_bytes + op.bytes;
    if (frame <= kInlineBytes && !peer_closed() &&
        try_write_frame({op.head.data(), op.head_bytes}, {op.src, op.bytes})) {
      op.request->add_bytes(frame);
      bytes_sent_ += frame;
    } else if (write_all(&frame, sizeof frame, nullptr) != Step::ok ||
               write_all(op.head.data(), op.head_bytes, op.request.get()) != Step::ok ||
               write_all(op.src, op.bytes, op.request.get()) != Step::ok ||
               write_all(&kPadding, padding_after(frame), nullptr) != Step::ok) {
      fail_op(send_, op);
      return;
    }
    finish_op(send_);
    op.request->complete();
    op = Op{};
  }
}

void ShmConnection::recv_loop() {
  Op op;
  while (next_op(recv_, op)) {
    std::uint64_t frame = 0;
    if (read_length(frame) != Step::ok) {
      fail_op(recv_, op);
      return;
    }
    if (frame > op.bytes) {
      // The rest of the stream is intact, but the caller's matching is now off by one message:
      // a protocol violation, which breaks the connection on both ends.
      const std::string why =
          core::str("the peer sent a message of ", frame,
                    " bytes, longer than the posted receive buffer of ", op.bytes, " bytes");
      fail_direction(recv_, why);
      fail_direction(send_, why);
      close_local_side();
      fail_op(recv_, op);
      return;
    }
    std::uint64_t padding = 0;
    if (read_all(op.dst, frame, op.request.get()) != Step::ok ||
        read_all(&padding, padding_after(frame), nullptr) != Step::ok) {
      fail_op(recv_, op);
      return;
    }
    finish_op(recv_);
    op.request->complete();
    op = Op{};
  }
}

ShmConnection::Step ShmConnection::write_all(const void* src, std::size_t n, Request* request) {
  const auto* p = static_cast<const std::byte*>(src);
  while (n > 0) {
    if (send_.failed.load(std::memory_order_acquire)) return Step::failed;
    const std::size_t k = tx_.write_some(p, n);
    if (k > 0) {
      p += k;
      n -= k;
      if (request != nullptr) {  // payload, not framing, counts as bytes moved
        request->add_bytes(k);
        bytes_sent_ += k;
      }
      continue;
    }
    if (peer_closed()) {
      fail_direction(send_, "the peer closed the connection");
      return Step::failed;
    }
    if (!tx_.wait_writable(kSlice) && peer_process_.exited()) {
      const std::string why = core::str("the peer process ", peer_process_.pid(), " exited");
      fail_direction(send_, why);
      fail_direction(recv_, why);
      return Step::failed;
    }
  }
  return Step::ok;
}

ShmConnection::Step ShmConnection::read_length(std::uint64_t& frame) {
  while (true) {
    if (const Step step = read_all(&frame, sizeof frame, nullptr); step != Step::ok) return step;
    // Published with the length word; one that does not end at the ring's end is a length no
    // receive holds, which the caller reports.
    if ((frame & kRewound) == 0 || !rx_.skip_to_start(frame & ~kRewound)) return Step::ok;
  }
}

ShmConnection::Step ShmConnection::read_all(void* dst, std::size_t n, Request* request) {
  const CopyMode mode = n >= kStreamingBytes ? CopyMode::streaming : CopyMode::cached;
  auto* p = static_cast<std::byte*>(dst);
  while (n > 0) {
    if (recv_.failed.load(std::memory_order_acquire)) return Step::failed;
    const std::size_t k = rx_.read_some(p, n, mode);
    if (k > 0) {
      p += k;
      n -= k;
      if (request != nullptr) {
        request->add_bytes(k);
        bytes_received_ += k;
      }
      continue;
    }
    // The peer's closed flag is set after its last publish, so flag-then-empty means the end;
    // a dead process publishes nothing more either. Data already in the ring is still delivered.
    std::string why;
    if (peer_closed()) {
      if (rx_.readable() > 0) continue;
      why = "the peer closed the connection";
    } else if (!rx_.wait_readable(kSlice) && peer_process_.exited() && rx_.readable() == 0) {
      why = core::str("the peer process ", peer_process_.pid(), " exited");
    } else {
      continue;
    }
    fail_direction(recv_, why);
    fail_direction(send_, why);
    return Step::failed;
  }
  return Step::ok;
}

bool ShmConnection::peer_closed() const {
  return segment_.closed_flag(1 - side_).load(std::memory_order_acquire) != 0;
}

void ShmConnection::fail_direction(Direction& dir, const std::string& why) {
  std::deque<Op> pending;
  std::string failure;
  {
    std::lock_guard lock(dir.mutex);
    if (dir.failed.load(std::memory_order_relaxed)) return;  // the first failure wins
    dir.failure = describe_failure(why);
    failure = dir.failure;
    pending.swap(dir.queue);
    dir.failed.store(true, std::memory_order_release);
  }
  dir.cv.notify_all();
  // Queued requests were never started, so their buffers are untouched: fail them now. The one
  // in progress (if any) is failed by its thread once it stops copying.
  for (auto& op : pending) op.request->fail(std::make_exception_ptr(PeerError(failure)));
  if (&dir == &send_) {
    tx_.wake_all();
  } else {
    rx_.wake_all();
  }
}

void ShmConnection::fail_op(Direction& dir, Op& op) {
  std::string failure;
  {
    std::lock_guard lock(dir.mutex);
    failure = dir.failure;
  }
  op.request->fail(std::make_exception_ptr(PeerError(failure)));
}

void ShmConnection::close_local_side() {
  segment_.closed_flag(side_).store(1, std::memory_order_release);
  tx_.wake_all();  // a peer asleep on either ring re-checks and sees the flag
  rx_.wake_all();
}

std::string ShmConnection::describe_failure(const std::string& why) const {
  return core::str("rank ", local_rank_, ": shm connection with peer rank ", peer_rank_,
                   " failed: ", why, " (", bytes_sent_.load(), " bytes sent, ",
                   bytes_received_.load(), " bytes received)");
}

// ---- rendezvous ----

std::unique_ptr<Connection> connect_shm(int local_rank, int peer_rank, Store& store,
                                        const std::string& prefix, core::Deadline deadline,
                                        const std::string& peer_process) {
  RINGLET_CHECK(local_rank >= 0 && peer_rank >= 0 && local_rank != peer_rank, ValueError,
                "connect_shm: bad rank pair local ", local_rank, ", peer ", peer_rank);
  const int lo = std::min(local_rank, peer_rank);
  const int hi = std::max(local_rank, peer_rank);
  const std::string key = core::str(prefix, "/shm/", lo, "-", hi);
  if (local_rank == lo) {
    ShmSegment segment = ShmSegment::create(local_rank, peer_rank);
    store.set(key, segment.name());
    return std::make_unique<ShmConnection>(std::move(segment), local_rank, peer_rank, deadline,
                                           peer_process);
  }
  const std::string name = store.get(key, deadline);
  return std::make_unique<ShmConnection>(ShmSegment::open(name, local_rank, peer_rank), local_rank,
                                         peer_rank, deadline);
}

std::string host_identity() {
  if (auto given = core::env_string("RINGLET_HOSTID")) {
    RINGLET_CHECK(!given->empty() && given->find_first_of(" \t\n") == std::string::npos, ValueError,
                  "RINGLET_HOSTID='", *given, "' must be one word, not empty");
    return *given;
  }
  char host[256] = {};
  RINGLET_CHECK(gethostname(host, sizeof host - 1) == 0, Error,
                "gethostname: ", core::errno_text());
  std::ifstream file("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  std::getline(file, boot_id);
  char net[128] = {};  // "net:[4026531840]"; unreadable: left out
  const ssize_t len = ::readlink("/proc/self/ns/net", net, sizeof net - 1);
  return core::str(host, "/", boot_id, len > 0 ? "/" : "", len > 0 ? net : "");
}

}  // namespace ringlet::transport
