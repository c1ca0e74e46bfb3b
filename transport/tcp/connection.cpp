// TcpConnection: striped frames over non-blocking sockets, each with its own thread and poll
// loop, receive in place, and failure that reaches every pending and later request. An orderly
// close ends every socket with a goodbye frame; a socket that ends without one fails the
// connection at once.
//
// Who moves the bytes:
//  - A send is written straight from the posting thread (a non-blocking sendmsg); whatever the
//    socket does not take is queued for the socket's thread, which writes it on POLLOUT.
//  - A receive is read by the thread that waits for it (Request::set_driver): it reads the
//    sockets itself and polls them while nothing is there, so a message costs no thread
//    hand-off, and its bytes land in the cache of the core that goes on to use them. It reads
//    and yields for a while before it sleeps in poll (kWaiterSpin). The
//    sockets' threads meanwhile poll only for the peer's hang-up, so an arriving message does
//    not wake them as well. Until the waiter comes, the kernel's socket buffers hold the data.
//  - A receive nobody waits for (Request::then), or one posted kUnwaited ago that nobody is
//    reading, becomes "background": while any is posted, every socket's thread polls for input
//    and reads what arrives. So messages posted but not waited for (a peer waiting for its own
//    send first) cannot fill the socket buffers and stall their sender for good.
//  - A socket whose next frame belongs to a message not posted yet "parks" (its thread stops
//    reading it). Posting that receive resumes it without a wake-up: its waiter will read it.
//    Only with background receives posted is the thread woken to read; otherwise it looks again
//    within kUnwaited. (Waking it on every resume cost a thread hand-off per message: a 2-rank
//    1 MiB all-reduce made 13k context switches in 2000 ops, 9.8k without.)
// One socket's frames, queue, locks and wake-up are socket.h's.
// Reading a socket (its frame in progress, `Socket::reader`) is done under the socket's
// read_mutex by whoever reads; shared state (posted receives, sequence numbers, sends, the
// failure) is guarded by Impl::mutex, always taken after read_mutex.
// A failure fails its requests only once no thread reads into or writes from their buffers:
// readers and writers stop at the `failed` flag, and fail_all takes every socket's read and
// write mutex (the one this thread already reads, named by ReadingSocket, excepted) before it
// fails anything. So a caller may free a buffer as soon as its request has failed.
#include "transport/tcp/connection.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

#include "core/deadline.h"
#include "core/error.h"
#include "core/thread_name.h"
#include "transport/errors.h"
#include "transport/tcp/handshake.h"
#include "transport/tcp/socket.h"
#include "transport/yield_window.h"

namespace ringlet::transport::tcp {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::uint64_t kNoMessage = ~std::uint64_t{0};  // the seq of a goodbye frame
constexpr auto kGoodbyeWait = std::chrono::seconds(2);
// How long a receive may stay posted with nobody reading it before the sockets' threads read it
// (and how often they look).
constexpr auto kUnwaited = std::chrono::milliseconds(5);
// How often an idle socket's thread looks for newly posted receives to apply kUnwaited to.
constexpr auto kIdleLook = std::chrono::milliseconds(50);
// A driving waiter polls in slices this long, so that it notices when another thread read its
// message meanwhile.
constexpr int kWaiterPollMs = 1;
// For this long after it starts waiting (counting only the time it looked itself, not other
// ranks' turns on its core: yield_window.h), a driving waiter reads its sockets again and again,
// yielding the core between tries, before it sleeps in poll: a small message's answer comes back
// over loopback within tens of microseconds, and a wake-up from poll costs about as much again
// (4 KiB all-reduce of 2 ranks: 36-49 us with poll alone, 9.4-12 us with this). Yielding, not
// pausing, so that ranks sharing a core (more ranks than cores) run meanwhile. 200 us covers a
// 64 KiB answer on a slow day: 2 ranks, near, took 64-79 us with 50 us, 47-69 us with this.
constexpr auto kWaiterSpin = std::chrono::microseconds(200);

struct SendState {
  RequestPtr request;
  int frames_left;
};

struct RecvSlot {
  Buffer buffer;
  RequestPtr request;
  std::uint64_t received = 0;
  std::uint64_t total = 0;
  bool sized = false;       // total learned from the first frame
  bool background = false;  // read by the sockets' threads (else by its waiter)
  bool driven = false;      // its waiter is reading (it stays a waiter's, however long)
  Clock::time_point posted;
};

int poll_ms(Clock::duration d) {
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(d).count();
  return static_cast<int>(std::clamp<std::int64_t>(ms, 0, 1000));
}

}  // namespace

struct TcpConnection::Impl {
  int local_rank, peer_rank;
  TcpOptions options;
  std::vector<std::unique_ptr<Socket>> sockets;
  std::mutex mutex;
  std::uint64_t next_send = 0, next_recv = 0;
  std::map<std::uint64_t, RecvSlot> recvs;
  std::map<std::uint64_t, SendState> sends;
  std::size_t background_recvs = 0;  // posted receives the sockets' threads read
  std::exception_ptr failure;
  std::atomic<bool> failed{false};  // set with `failure`; readers and writers stop at it
  std::atomic<std::uint64_t> sent{0}, received{0};
  std::atomic<bool> closing{false}, stopping{false};
  std::size_t goodbyes_received = 0, goodbyes_sent = 0;  // guarded by mutex
  std::condition_variable goodbye_sent;

  std::string who() const {
    return core::str("rank ", local_rank, " <-> rank ", peer_rank, " (tcp)");
  }

  std::exception_ptr peer_error(const std::string& reason) const {
    return std::make_exception_ptr(PeerError(core::str(
        "rank ", local_rank, ": connection to peer rank ", peer_rank, " (tcp) failed: ", reason,
        " after sending ", sent.load(), " bytes and receiving ", received.load(), " bytes")));
  }

  // Fails everything pending and every later request with `error`; shuts the sockets down (they
  // are closed once the threads are joined). The requests fail only after every socket has let
  // go of their buffers.
  void fail_all(std::exception_ptr error) {
    std::vector<RequestPtr> victims;
    {
      std::lock_guard lock(mutex);
      if (failure) return;
      failure = error;
      failed.store(true);
      for (auto& [seq, slot] : recvs) victims.push_back(slot.request);
      for (auto& [seq, state] : sends) victims.push_back(state.request);
      recvs.clear();
      sends.clear();
      background_recvs = 0;
      for (auto& c : sockets) c->read_done = true;
    }
    goodbye_sent.notify_all();
    for (auto& c : sockets) {
      ::shutdown(c->fd, SHUT_RDWR);
      wake(c.get());
    }
    for (auto& c : sockets) let_go(c.get());
    for (auto& r : victims) r->fail(error);
  }

  // Waits until nobody reads into or writes from a buffer through socket `c` (each stops at
  // `failed`), and drops its unwritten frames. Called after `failed` is set.
  void let_go(Socket* c) {
    std::unique_lock read(c->read_mutex, std::defer_lock);
    if (!reading_now(c)) read.lock();
    std::lock_guard write(c->write_mutex);
    c->queue.clear();
  }

  void on_io_error(int error, const char* during) {
    if (closing.load()) return;  // our own shutdown; fail_all is idempotent otherwise
    const std::string what =
        error == 0 ? "the peer closed the connection without a goodbye (EOF: it exited or crashed)"
                   : std::system_category().message(error);
    fail_all(peer_error(core::str(what, " while ", during)));
  }

  // --- orderly close ---
  // Queues a goodbye behind every socket's pending frames and waits (bounded) until they are
  // written, so the peer reads everything sent before it learns that the connection ends.
  void say_goodbye() {
    {
      std::lock_guard lock(mutex);
      if (failure) return;
    }
    for (auto& c : sockets) {
      enqueue(c.get(), SendFrame{FrameHeader{kFrameMagic, kFrameGoodbye, kNoMessage, 0, 0, 0},
                                 nullptr, kNoMessage});
    }
    std::unique_lock lock(mutex);
    core::wait_until(goodbye_sent, lock, core::Deadline::after(kGoodbyeWait),
                     [&] { return goodbyes_sent == sockets.size() || failure; });
  }

  // The peer closed socket `c` in order: nothing more arrives on it. Once every socket said
  // goodbye, a receive still pending can never complete.
  void on_goodbye(Socket* c) {
    std::uint64_t pending;
    {
      std::lock_guard lock(mutex);
      if (c->read_done) return;
      c->read_done = true;
      if (++goodbyes_received < sockets.size() || recvs.empty()) return;
      pending = recvs.begin()->first;
    }
    fail_all(peer_error(core::str("the peer closed the connection while message ", pending,
                                  " was still expected")));
  }

  // --- receiving ---
  enum class Next { payload, frame_done, parked, stop };

  // A whole header is in c->reader: find its receive. Called with read_mutex held.
  Next on_header(Socket* c) {
    Reader& r = c->reader;
    const FrameHeader h = r.header;
    if (h.magic == kFrameMagic && h.flags == kFrameGoodbye) {
      on_goodbye(c);
      return Next::stop;
    }
    std::string problem;
    RequestPtr finished;
    {
      std::lock_guard lock(mutex);
      if (failure) return Next::stop;
      auto it = recvs.find(h.seq);
      if (it == recvs.end()) {
        if (h.seq >= next_recv) {
          c->parked = true;  // resumed by recv() once message h.seq has a buffer
          return Next::parked;
        }
        problem = core::str("frame for message ", h.seq, " which already completed");
      } else {
        RecvSlot& slot = it->second;
        problem = check_frame(h, slot.buffer.bytes);
        if (problem.empty() && slot.sized && slot.total != h.total) {
          problem = core::str("frames of message ", h.seq, " disagree on its size (", slot.total,
                              " vs ", h.total, ")");
        }
        if (problem.empty()) {
          slot.sized = true;
          slot.total = h.total;
          r.seq = h.seq;
          r.length = h.length;
          r.dst = static_cast<char*>(slot.buffer.data) + h.offset;
          r.left = h.length;
          if (h.length == 0 && slot.received == slot.total) finished = finish_recv(it);
        }
      }
    }
    if (!problem.empty()) {
      fail_all(peer_error("protocol violation: " + problem));
      return Next::stop;
    }
    if (finished) finished->complete();
    return h.length == 0 ? Next::frame_done : Next::payload;
  }

  // The payload of the frame in c->reader is all in its buffer.
  void on_payload(Socket* c) {
    const Reader& r = c->reader;
    received += r.length;
    RequestPtr finished;
    {
      std::lock_guard lock(mutex);
      auto it = recvs.find(r.seq);
      if (it == recvs.end()) return;  // failed meanwhile
      it->second.received += r.length;
      it->second.request->add_bytes(r.length);
      if (it->second.received == it->second.total) finished = finish_recv(it);
    }
    if (finished) finished->complete();
  }

  // Called with the mutex held; the caller completes the returned request after unlocking.
  RequestPtr finish_recv(std::map<std::uint64_t, RecvSlot>::iterator it) {
    RequestPtr request = std::move(it->second.request);
    if (it->second.background) --background_recvs;
    recvs.erase(it);
    return request;
  }

  // Reads what socket `c` holds now, frame after frame, until it would block, the next frame
  // waits for a receive not posted yet, the socket is done, or `until` (if given) is done.
  // Called with c->read_mutex held.
  void pump(Socket* c, const Request* until) {
    Reader& r = c->reader;
    while (!failed.load()) {
      if (r.in_payload) {
        // The rest of the payload and the next header in one call.
        iovec parts[2] = {{r.dst, static_cast<std::size_t>(r.left)},
                          {&r.header, sizeof(FrameHeader)}};
        const ssize_t n = ::readv(c->fd, parts, 2);
        if (n == 0) return on_io_error(0, "reading a frame payload");
        if (n < 0) {
          if (errno == EINTR) continue;
          if (errno == EAGAIN || errno == EWOULDBLOCK) return;
          return on_io_error(errno, "reading a frame payload");
        }
        const auto got = static_cast<std::uint64_t>(n);
        const std::uint64_t taken = std::min(got, r.left);
        r.dst += taken;
        r.left -= taken;
        if (r.left > 0) continue;
        r.in_payload = false;
        r.header_got = static_cast<std::size_t>(got - taken);
        on_payload(c);
        if (until != nullptr && until->done()) return;
        continue;
      }
      if (r.header_got < sizeof(FrameHeader)) {
        const ssize_t n = ::recv(c->fd, reinterpret_cast<char*>(&r.header) + r.header_got,
                                 sizeof(FrameHeader) - r.header_got, MSG_DONTWAIT);
        if (n == 0) return on_io_error(0, "reading a frame header");
        if (n < 0) {
          if (errno == EINTR) continue;
          if (errno == EAGAIN || errno == EWOULDBLOCK) return;
          return on_io_error(errno, "reading a frame header");
        }
        r.header_got += static_cast<std::size_t>(n);
        continue;
      }
      switch (on_header(c)) {
        case Next::payload:
          r.header_got = 0;
          r.in_payload = true;
          break;
        case Next::frame_done:
          r.header_got = 0;
          if (until != nullptr && until->done()) return;
          break;
        case Next::parked:  // the header stays; on_header runs again once resumed
        case Next::stop: return;
      }
    }
  }

  // Marks a posted receive as read by the sockets' threads. Called with the mutex held.
  void make_background(RecvSlot& slot) {
    if (slot.background) return;
    slot.background = true;
    if (background_recvs++ == 0) {
      for (auto& c : sockets) wake(c.get());
    }
  }

  // Request::wait's driver for receive `seq`: read the sockets on this thread until the message
  // is in. Hands it to the sockets' threads when nobody will wait (deadline null) or when they
  // read anyway (background receives are posted).
  void drive(std::uint64_t seq, const Request* request, const core::Deadline* deadline) {
    std::vector<Socket*> readable;
    std::vector<pollfd> fds;
    YieldWindow window(kWaiterSpin);
    while (!request->done()) {
      readable.clear();
      {
        std::lock_guard lock(mutex);
        auto it = recvs.find(seq);
        if (it == recvs.end() || it->second.background) return;
        if (deadline == nullptr || background_recvs > 0) {
          make_background(it->second);
          return;
        }
        it->second.driven = true;
        // A parked socket's next frame is for a later message, so this one is not behind it.
        for (auto& c : sockets) {
          if (!c->parked && !c->read_done) readable.push_back(c.get());
        }
      }
      if (deadline->expired() || readable.empty()) return;
      for (Socket* c : readable) {
        ReadingSocket read(c);
        pump(c, request);
        if (request->done()) return;
      }
      if (window.open()) {
        window.yield();
        continue;
      }
      fds.clear();
      for (Socket* c : readable) fds.push_back({c->fd, POLLIN | POLLRDHUP, 0});
      ::poll(fds.data(), fds.size(), std::min(kWaiterPollMs, poll_ms(deadline->remaining())));
    }
  }

  // --- sending ---
  // A frame goes straight onto the socket from the posting thread when nothing is queued
  // before it; whatever the socket does not take is queued for the socket's thread.
  void enqueue(Socket* c, SendFrame frame) {
    int error = 0;
    {
      std::lock_guard lock(c->write_mutex);
      if (failed.load()) return;  // its request has failed (or is about to)
      if (c->queue.empty()) {
        error = write_some(c->fd, frame);
        if (error == EAGAIN) {
          c->queue.push_back(frame);
          wake(c);
          return;
        }
      } else {
        c->queue.push_back(frame);
        return;
      }
    }
    if (error != 0) return on_io_error(error, "writing a frame");
    frame_written(frame);
  }

  // Socket thread, on POLLOUT: writes queued frames until the socket is full or the queue empty.
  void flush(Socket* c) {
    std::vector<SendFrame> done;
    int error = 0;
    {
      std::lock_guard lock(c->write_mutex);
      while (!c->queue.empty() && !failed.load()) {
        error = write_some(c->fd, c->queue.front());
        if (error != 0) break;
        done.push_back(c->queue.front());
        c->queue.pop_front();
      }
    }
    for (const auto& f : done) frame_written(f);
    if (error != 0 && error != EAGAIN) on_io_error(error, "writing a frame");
  }

  // A frame is on the socket: account for it and complete its message once all frames are.
  void frame_written(const SendFrame& done) {
    if (done.seq == kNoMessage) {
      {
        std::lock_guard lock(mutex);
        ++goodbyes_sent;
      }
      goodbye_sent.notify_all();
      return;
    }
    sent += done.header.length;
    RequestPtr finished;
    {
      std::lock_guard lock(mutex);
      auto it = sends.find(done.seq);
      if (it != sends.end()) {
        it->second.request->add_bytes(done.header.length);
        if (--it->second.frames_left == 0) {
          finished = it->second.request;
          sends.erase(it);
        }
      }
    }
    if (finished) finished->complete();
  }

  // A message too small to stripe goes whole on the first socket. (Dealt round the sockets
  // instead, 4 ranks on 2 cores took 1.4x as long for a 4 KiB all-reduce: bench/README.md.)
  bool one_frame(std::uint64_t total) const {
    return total < options.stripe_min_bytes || sockets.size() == 1;
  }

  // Sends `head` (copied into the frame; only for a message that goes as one frame) followed
  // by `body` as one message.
  RequestPtr post(ConstBuffer head, ConstBuffer body) {
    const std::uint64_t total = head.bytes + body.bytes;
    auto request = std::make_shared<Request>(
        RequestLabel{RequestLabel::Kind::send, local_rank, peer_rank, total, "tcp"});
    const std::size_t n = sockets.size();
    const auto* data = static_cast<const char*>(body.data);
    std::vector<std::pair<Socket*, SendFrame>> frames;
    {
      std::lock_guard lock(mutex);
      if (failure) {
        request->fail(failure);
        return request;
      }
      const std::uint64_t seq = next_send++;
      if (one_frame(total)) {
        SendFrame f{FrameHeader{kFrameMagic, 0, seq, 0, total, total}, data, seq};
        if (head.bytes > 0) std::memcpy(f.head.data(), head.data, head.bytes);
        f.head_bytes = static_cast<std::uint32_t>(head.bytes);
        frames.push_back({sockets[0].get(), f});
      } else {
        const std::uint64_t stripe = ((total + n - 1) / n + 4095) / 4096 * 4096;
        for (std::size_t i = 0; i < n && i * stripe < total; ++i) {
          const std::uint64_t offset = i * stripe;
          const std::uint64_t length = std::min(stripe, total - offset);
          frames.push_back(
              {sockets[i].get(), SendFrame{FrameHeader{kFrameMagic, 0, seq, offset, length, total},
                                           data + offset, seq}});
        }
      }
      sends[seq] = SendState{request, static_cast<int>(frames.size())};
    }
    for (auto& [socket, frame] : frames) enqueue(socket, frame);
    return request;
  }

  // --- the socket's thread ---
  void run(Socket* c) {
    while (!stopping.load()) {
      bool want_in = false, want_hangup = false, resumed = false, posted = false, parked = false;
      {
        std::lock_guard lock(mutex);
        if (failure) return;
        // A receive posted a while ago that nobody is reading: the threads read it.
        const auto now = Clock::now();
        for (auto& [seq, slot] : recvs) {
          if (!slot.driven && now - slot.posted >= kUnwaited) make_background(slot);
        }
        const bool readable = !c->parked && !c->read_done;
        want_in = readable && background_recvs > 0;
        want_hangup = readable;
        // Without background receives, a resumed socket's frame is its waiter's to read.
        resumed = want_in && std::exchange(c->resumed, false);
        posted = !recvs.empty();
        parked = c->parked;
      }
      if (resumed) {  // a resumed socket may hold a whole frame already
        ReadingSocket read(c);
        pump(c, nullptr);
      }
      bool want_out;
      {
        std::lock_guard lock(c->write_mutex);
        want_out = !c->queue.empty();
      }
      pollfd p[2] = {{c->fd, 0, 0}, {c->wake_fd, POLLIN, 0}};
      p[0].events = static_cast<short>((want_in ? POLLIN : 0) | (want_hangup ? POLLRDHUP : 0) |
                                       (want_out ? POLLOUT : 0));
      if (p[0].events == 0) p[0].fd = -1;
      // Without input to read, look again now and then for unwaited receives (and, parked, for
      // the receive that resumes the socket).
      const int timeout = want_in || !(want_hangup || parked)
                              ? -1
                              : poll_ms(posted || parked ? kUnwaited : kIdleLook);
      if (::poll(p, 2, timeout) < 0 && errno != EINTR) {
        return on_io_error(errno, "polling the socket");
      }
      if (p[1].revents != 0) {
        std::uint64_t count;
        [[maybe_unused]] const ssize_t n = ::read(c->wake_fd, &count, sizeof count);
      }
      if (stopping.load()) return;
      const short got = p[0].revents;
      if ((got & (POLLOUT | POLLERR | POLLHUP)) && want_out) flush(c);
      if (got & (POLLIN | POLLRDHUP | POLLERR | POLLHUP)) {
        ReadingSocket read(c);
        pump(c, nullptr);
      }
    }
  }
};

TcpConnection::TcpConnection(int local_rank, int peer_rank, const std::vector<int>& fds,
                             const TcpOptions& options)
    : impl_(std::make_unique<Impl>()) {
  RINGLET_CHECK(!fds.empty(), ValueError, "TcpConnection needs at least one socket");
  impl_->local_rank = local_rank;
  impl_->peer_rank = peer_rank;
  impl_->options = options;
  for (int fd : fds) {
    auto c = std::make_unique<Socket>();
    c->fd = fd;
    impl_->sockets.push_back(std::move(c));
    const int flags = ::fcntl(fd, F_GETFL);
    RINGLET_CHECK(flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0, Error, impl_->who(),
                  ": cannot make socket ", fd, " non-blocking: ", std::strerror(errno));
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (options.socket_buffer_bytes > 0) {
      const int bytes = options.socket_buffer_bytes;
      ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
      ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
    }
    impl_->sockets.back()->wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    RINGLET_CHECK(impl_->sockets.back()->wake_fd >= 0, Error, impl_->who(),
                  ": cannot create an eventfd: ", std::strerror(errno));
  }
  for (auto& c : impl_->sockets) {
    c->thread = std::thread([impl = impl_.get(), ch = c.get()] {
      core::name_this_thread("rl-tcp");
      impl->run(ch);
    });
  }
}

TcpConnection::~TcpConnection() {
  impl_->say_goodbye();
  impl_->closing = true;
  impl_->fail_all(std::make_exception_ptr(
      core::Error(core::str("rank ", impl_->local_rank, ": connection to peer rank ",
                            impl_->peer_rank, " (tcp) was closed locally"))));
  impl_->stopping = true;
  for (auto& c : impl_->sockets) wake(c.get());
  // Every thread first: one still running may wake (write to) any socket's eventfd, and a
  // closed descriptor number can be reused by the time it does.
  for (auto& c : impl_->sockets) {
    if (c->thread.joinable()) c->thread.join();
  }
  for (auto& c : impl_->sockets) {
    ::close(c->fd);
    ::close(c->wake_fd);
  }
}

RequestPtr TcpConnection::send(ConstBuffer buffer) {
  RINGLET_CHECK(buffer.device.is_cpu(), DeviceError, impl_->who(),
                ": tcp sends host memory; got a buffer on ", buffer.device);
  count_message();
  return impl_->post({}, buffer);
}

RequestPtr TcpConnection::try_send_joined(ConstBuffer head, ConstBuffer body) {
  if (!head.device.is_cpu() || !body.device.is_cpu() || head.bytes > kJoinedHeadMax ||
      !impl_->one_frame(head.bytes + body.bytes)) {
    return nullptr;
  }
  count_message();
  return impl_->post(head, body);
}

RequestPtr TcpConnection::recv(Buffer buffer) {
  RINGLET_CHECK(buffer.device.is_cpu(), DeviceError, impl_->who(),
                ": tcp receives into host memory; got a buffer on ", buffer.device);
  auto request = std::make_shared<Request>(RequestLabel{RequestLabel::Kind::recv, impl_->local_rank,
                                                        impl_->peer_rank, buffer.bytes, "tcp"});
  std::vector<Socket*> resume;  // to wake: their threads read the waiting frame
  bool peer_gone = false;
  {
    std::lock_guard lock(impl_->mutex);
    if (impl_->failure) {
      request->fail(impl_->failure);
      return request;
    }
    const std::uint64_t seq = impl_->next_recv++;
    RecvSlot& slot = impl_->recvs[seq];
    slot.buffer = buffer;
    slot.request = request;
    slot.posted = Clock::now();
    request->set_driver([impl = impl_.get(), seq, r = request.get()](const core::Deadline* d) {
      impl->drive(seq, r, d);
    });
    peer_gone = impl_->goodbyes_received == impl_->sockets.size();
    // A parked socket's waiting frame may be this message's. Its waiter reads it; the socket's
    // thread only when background receives are posted (it reads then anyway), else on its next
    // look (kUnwaited), so that a receive nobody waits for still moves.
    for (auto& c : impl_->sockets) {
      if (c->parked) {
        c->parked = false;
        c->resumed = true;
        if (impl_->background_recvs > 0) resume.push_back(c.get());
      }
    }
  }
  if (peer_gone) {
    impl_->fail_all(impl_->peer_error("a receive was posted after the peer closed the connection"));
  }
  for (Socket* c : resume) wake(c);
  return request;
}

void TcpConnection::abort(const std::string& reason) {
  impl_->fail_all(impl_->peer_error("aborted: " + reason));
}

int TcpConnection::local_rank() const { return impl_->local_rank; }
int TcpConnection::peer_rank() const { return impl_->peer_rank; }
std::uint64_t TcpConnection::bytes_sent() const { return impl_->sent.load(); }
std::uint64_t TcpConnection::bytes_received() const { return impl_->received.load(); }

}  // namespace ringlet::transport::tcp
