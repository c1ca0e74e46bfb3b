// TcpConnection: per-socket io threads, striped frames, receive-in-place, and failure that
// reaches every pending and later request. An orderly close ends every socket with a goodbye
// frame; a socket that ends without one fails the connection at once. Shared state (posted
// receives, sequence numbers, in-flight sends, the failure) is guarded by one mutex; each socket's
// reads and writes run only on its own io thread.
#include "transport/tcp/connection.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <array>
#include <asio.hpp>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "core/deadline.h"
#include "core/error.h"
#include "transport/errors.h"
#include "transport/tcp/handshake.h"

namespace ringlet::transport::tcp {
namespace {

constexpr std::uint64_t kNoMessage = ~std::uint64_t{0};  // the seq of a goodbye frame
constexpr auto kGoodbyeWait = std::chrono::seconds(2);

struct SendFrame {
  FrameHeader header;
  const char* data;
  std::uint64_t seq;
  std::uint64_t written = 0;  // bytes of header + payload already on the socket

  // What is not on the socket yet: the rest of the header, then the rest of the payload
  // (either may be empty).
  std::array<std::pair<const char*, std::size_t>, 2> unwritten() const {
    const std::uint64_t head = sizeof(FrameHeader);
    const std::uint64_t in_head = std::min(written, head);
    const std::uint64_t in_payload = written - in_head;
    return {{{reinterpret_cast<const char*>(&header) + in_head,
              static_cast<std::size_t>(head - in_head)},
             {data + in_payload, static_cast<std::size_t>(header.length - in_payload)}}};
  }
};

struct SendState {
  RequestPtr request;
  int frames_left;
};

struct RecvSlot {
  Buffer buffer;
  RequestPtr request;
  std::uint64_t received = 0;
  std::uint64_t total = 0;
  bool sized = false;  // total learned from the first frame
};

struct Channel {
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> guard{io.get_executor()};
  asio::ip::tcp::socket socket{io};
  std::thread thread;
  std::mutex write_mutex;       // guards queue and writing
  std::deque<SendFrame> queue;  // frames to write, in order; the front may be in flight
  bool writing = false;         // the io thread owns the socket's write side
  FrameHeader header;           // the frame being received
  bool parked = false;          // guarded by Impl::mutex
  bool goodbye = false;         // the peer closed this socket in order; guarded by Impl::mutex
};

}  // namespace

struct TcpConnection::Impl {
  int local_rank, peer_rank;
  TcpOptions options;
  std::vector<std::unique_ptr<Channel>> channels;
  std::mutex mutex;
  std::uint64_t next_send = 0, next_recv = 0;
  std::map<std::uint64_t, RecvSlot> recvs;
  std::map<std::uint64_t, SendState> sends;
  std::exception_ptr failure;
  std::atomic<std::uint64_t> sent{0}, received{0};
  std::atomic<bool> closing{false};
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

  // Fails everything pending and every later request with `error`; closes the sockets.
  void fail_all(std::exception_ptr error) {
    std::vector<RequestPtr> victims;
    {
      std::lock_guard lock(mutex);
      if (failure) return;
      failure = error;
      for (auto& [seq, slot] : recvs) victims.push_back(slot.request);
      for (auto& [seq, state] : sends) victims.push_back(state.request);
      recvs.clear();
      sends.clear();
    }
    for (auto& r : victims) r->fail(error);
    for (auto& c : channels) {
      asio::post(c->io, [ch = c.get()] {
        std::lock_guard lock(ch->write_mutex);  // no direct write races the close
        asio::error_code ignored;
        ch->socket.shutdown(asio::socket_base::shutdown_both, ignored);
        ch->socket.close(ignored);
      });
    }
  }

  void on_io_error(const asio::error_code& ec, const char* during) {
    if (closing.load()) return;  // our own shutdown; fail_all is idempotent otherwise
    const std::string what =
        ec == asio::error::eof
            ? "the peer closed the connection without a goodbye (EOF: it exited or crashed)"
            : ec.message();
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
    for (auto& c : channels) {
      enqueue(c.get(), SendFrame{FrameHeader{kFrameMagic, kFrameGoodbye, kNoMessage, 0, 0, 0},
                                 nullptr, kNoMessage});
    }
    std::unique_lock lock(mutex);
    core::wait_until(goodbye_sent, lock, core::Deadline::after(kGoodbyeWait),
                     [&] { return goodbyes_sent == channels.size() || failure; });
  }

  // The peer closed socket `c` in order: nothing more arrives on it. Once every socket said
  // goodbye, a receive still pending can never complete.
  void on_goodbye(Channel* c) {
    {
      std::lock_guard lock(mutex);
      if (c->goodbye) return;
      c->goodbye = true;
      if (++goodbyes_received < channels.size() || recvs.empty()) return;
    }
    fail_all(peer_error(core::str("the peer closed the connection while message ", next_pending(),
                                  " was still expected")));
  }

  std::uint64_t next_pending() {
    std::lock_guard lock(mutex);
    return recvs.empty() ? next_recv : recvs.begin()->first;
  }

  // --- receiving ---
  void read_header(Channel* c) {
    asio::async_read(c->socket, asio::buffer(&c->header, sizeof(FrameHeader)),
                     [this, c](const asio::error_code& ec, std::size_t) {
                       if (ec) return on_io_error(ec, "reading a frame header");
                       on_header(c);
                     });
  }

  void on_header(Channel* c) {
    const FrameHeader h = c->header;
    if (h.magic == kFrameMagic && h.flags == kFrameGoodbye) return on_goodbye(c);
    char* dst = nullptr;
    std::string problem;
    {
      std::lock_guard lock(mutex);
      if (failure) return;
      auto it = recvs.find(h.seq);
      if (it == recvs.end()) {
        if (h.seq < next_recv) {
          problem = core::str("frame for message ", h.seq, " which already completed");
        } else {
          c->parked = true;  // resumed by recv() once message h.seq has a buffer
          return;
        }
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
          dst = static_cast<char*>(slot.buffer.data) + h.offset;
          if (h.length == 0 && slot.received == slot.total) finish_recv(it);
        }
      }
    }
    if (!problem.empty()) return fail_all(peer_error("protocol violation: " + problem));
    if (h.length == 0) return read_header(c);
    asio::async_read(c->socket, asio::buffer(dst, h.length),
                     [this, c, h](const asio::error_code& ec, std::size_t) {
                       if (ec) return on_io_error(ec, "reading a frame payload");
                       received += h.length;
                       {
                         std::lock_guard lock(mutex);
                         auto it = recvs.find(h.seq);
                         if (it == recvs.end()) return;  // failed meanwhile
                         it->second.received += h.length;
                         it->second.request->add_bytes(h.length);
                         if (it->second.received == it->second.total) finish_recv(it);
                       }
                       read_header(c);
                     });
  }

  // Called with the mutex held.
  void finish_recv(std::map<std::uint64_t, RecvSlot>::iterator it) {
    it->second.request->complete();
    recvs.erase(it);
  }

  // --- sending ---
  // A frame goes straight onto the socket from the posting thread when nothing is queued
  // before it (a non-blocking sendmsg: no hand-off to the io thread for a message the socket
  // takes at once); whatever the socket does not take is queued for the io thread.
  void enqueue(Channel* c, SendFrame frame) {
    std::unique_lock lock(c->write_mutex);
    if (!c->writing && c->queue.empty()) {
      write_direct(c, frame);
      if (frame.written == frame_bytes(frame)) {
        lock.unlock();
        frame_written(frame);
        return;
      }
    }
    c->queue.push_back(frame);
    if (c->writing) return;
    c->writing = true;
    lock.unlock();
    asio::post(c->io, [this, c] { write_next(c); });
  }

  static std::uint64_t frame_bytes(const SendFrame& f) {
    return sizeof(FrameHeader) + f.header.length;
  }

  // One non-blocking sendmsg of what is left of `f`; errors are left to the io thread's write.
  static void write_direct(Channel* c, SendFrame& f) {
    iovec parts[2];
    std::size_t n = 0;
    for (const auto& [p, len] : f.unwritten()) {
      if (len > 0) parts[n++] = {const_cast<char*>(p), len};
    }
    msghdr msg{};
    msg.msg_iov = parts;
    msg.msg_iovlen = n;
    const ssize_t sent = ::sendmsg(c->socket.native_handle(), &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (sent > 0) f.written += static_cast<std::uint64_t>(sent);
  }

  // Io thread: writes the queue's front (the rest of it) and goes on until the queue is empty.
  void write_next(Channel* c) {
    const SendFrame* front;  // stays put until popped (deque::push_back keeps references)
    {
      std::lock_guard lock(c->write_mutex);
      if (c->queue.empty()) {
        c->writing = false;
        return;
      }
      front = &c->queue.front();
    }
    const auto rest = front->unwritten();
    const std::array<asio::const_buffer, 2> buffers{asio::buffer(rest[0].first, rest[0].second),
                                                    asio::buffer(rest[1].first, rest[1].second)};
    asio::async_write(c->socket, buffers, [this, c](const asio::error_code& ec, std::size_t) {
      if (ec) return on_io_error(ec, "writing a frame");
      SendFrame done;
      {
        std::lock_guard lock(c->write_mutex);
        done = c->queue.front();
        c->queue.pop_front();
      }
      frame_written(done);
      write_next(c);
    });
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
};

TcpConnection::TcpConnection(int local_rank, int peer_rank, const std::vector<int>& fds,
                             const TcpOptions& options)
    : impl_(std::make_unique<Impl>()) {
  RINGLET_CHECK(!fds.empty(), ValueError, "TcpConnection needs at least one socket");
  impl_->local_rank = local_rank;
  impl_->peer_rank = peer_rank;
  impl_->options = options;
  for (int fd : fds) {
    auto c = std::make_unique<Channel>();
    asio::error_code ec;
    sockaddr_storage local{};
    socklen_t length = sizeof local;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length);
    c->socket.assign(local.ss_family == AF_INET6 ? asio::ip::tcp::v6() : asio::ip::tcp::v4(), fd,
                     ec);
    RINGLET_CHECK(!ec, Error, impl_->who(), ": cannot adopt socket: ", ec.message());
    c->socket.set_option(asio::ip::tcp::no_delay(true), ec);
    if (options.socket_buffer_bytes > 0) {
      c->socket.set_option(asio::socket_base::send_buffer_size(options.socket_buffer_bytes), ec);
      c->socket.set_option(asio::socket_base::receive_buffer_size(options.socket_buffer_bytes), ec);
    }
    impl_->channels.push_back(std::move(c));
  }
  for (auto& c : impl_->channels) {
    Channel* ch = c.get();
    asio::post(ch->io, [impl = impl_.get(), ch] { impl->read_header(ch); });
    ch->thread = std::thread([ch] { ch->io.run(); });
  }
}

TcpConnection::~TcpConnection() {
  impl_->say_goodbye();
  impl_->closing = true;
  impl_->fail_all(std::make_exception_ptr(
      core::Error(core::str("rank ", impl_->local_rank, ": connection to peer rank ",
                            impl_->peer_rank, " (tcp) was closed locally"))));
  for (auto& c : impl_->channels) {
    c->guard.reset();
    asio::post(c->io, [ch = c.get()] {
      std::lock_guard lock(ch->write_mutex);
      asio::error_code ignored;
      ch->socket.close(ignored);
    });
  }
  for (auto& c : impl_->channels) {
    c->io.stop();
    c->thread.join();
  }
}

RequestPtr TcpConnection::send(ConstBuffer buffer) {
  RINGLET_CHECK(buffer.device.is_cpu(), DeviceError, impl_->who(),
                ": tcp sends host memory; got a buffer on ", buffer.device);
  auto request =
      std::make_shared<Request>(core::str("rank ", impl_->local_rank, " send of ", buffer.bytes,
                                          " bytes to rank ", impl_->peer_rank, " (tcp)"));
  const std::size_t n = impl_->channels.size();
  std::vector<std::pair<Channel*, SendFrame>> frames;
  {
    std::lock_guard lock(impl_->mutex);
    if (impl_->failure) {
      request->fail(impl_->failure);
      return request;
    }
    const std::uint64_t seq = impl_->next_send++;
    const auto* data = static_cast<const char*>(buffer.data);
    const std::uint64_t total = buffer.bytes;
    if (total < impl_->options.stripe_min_bytes || n == 1) {
      frames.push_back({impl_->channels[seq % n].get(),
                        SendFrame{FrameHeader{kFrameMagic, 0, seq, 0, total, total}, data, seq}});
    } else {
      const std::uint64_t stripe = ((total + n - 1) / n + 4095) / 4096 * 4096;
      for (std::size_t i = 0; i < n && i * stripe < total; ++i) {
        const std::uint64_t offset = i * stripe;
        const std::uint64_t length = std::min(stripe, total - offset);
        frames.push_back({impl_->channels[i].get(),
                          SendFrame{FrameHeader{kFrameMagic, 0, seq, offset, length, total},
                                    data + offset, seq}});
      }
    }
    impl_->sends[seq] = SendState{request, static_cast<int>(frames.size())};
  }
  for (auto& [channel, frame] : frames) impl_->enqueue(channel, frame);
  return request;
}

RequestPtr TcpConnection::recv(Buffer buffer) {
  RINGLET_CHECK(buffer.device.is_cpu(), DeviceError, impl_->who(),
                ": tcp receives into host memory; got a buffer on ", buffer.device);
  auto request = std::make_shared<Request>(core::str("rank ", impl_->local_rank, " recv of up to ",
                                                     buffer.bytes, " bytes from rank ",
                                                     impl_->peer_rank, " (tcp)"));
  std::vector<Channel*> resume;
  bool peer_gone = false;
  {
    std::lock_guard lock(impl_->mutex);
    if (impl_->failure) {
      request->fail(impl_->failure);
      return request;
    }
    impl_->recvs[impl_->next_recv++] = RecvSlot{buffer, request};
    peer_gone = impl_->goodbyes_received == impl_->channels.size();
    for (auto& c : impl_->channels) {
      if (c->parked) {
        c->parked = false;
        resume.push_back(c.get());
      }
    }
  }
  if (peer_gone) {
    impl_->fail_all(impl_->peer_error("a receive was posted after the peer closed the connection"));
  }
  for (Channel* c : resume) asio::post(c->io, [impl = impl_.get(), c] { impl->on_header(c); });
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
