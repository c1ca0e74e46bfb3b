// One socket of a TcpConnection: writing a frame without blocking, waking the socket's thread,
// and which socket this thread reads.
#include "transport/tcp/socket.h"

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>

namespace ringlet::transport::tcp {
namespace {

// The socket whose read_mutex this thread holds.
thread_local const Socket* t_reading = nullptr;

}  // namespace

int write_some(int fd, SendFrame& f) {
  const std::uint64_t header = sizeof(FrameHeader), head = f.head_bytes;
  const std::uint64_t data = f.header.length - head;
  while (f.written < f.bytes()) {
    iovec parts[3];
    int n = 0;
    if (f.written < header) {
      parts[n++] = {reinterpret_cast<char*>(&f.header) + f.written,
                    static_cast<std::size_t>(header - f.written)};
    }
    const std::uint64_t in_payload = f.written < header ? 0 : f.written - header;
    if (in_payload < head) {
      parts[n++] = {f.head.data() + in_payload, static_cast<std::size_t>(head - in_payload)};
    }
    const std::uint64_t in_data = in_payload < head ? 0 : in_payload - head;
    if (data > in_data) {
      parts[n++] = {const_cast<char*>(f.data) + in_data, static_cast<std::size_t>(data - in_data)};
    }
    msghdr msg{};
    msg.msg_iov = parts;
    msg.msg_iovlen = static_cast<std::size_t>(n);
    const ssize_t sent = ::sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) continue;
      return errno == EWOULDBLOCK ? EAGAIN : errno;
    }
    f.written += static_cast<std::uint64_t>(sent);
  }
  return 0;
}

void wake(Socket* c) {
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(c->wake_fd, &one, sizeof one);
}

ReadingSocket::ReadingSocket(Socket* c) : lock_(c->read_mutex), previous_(t_reading) {
  t_reading = c;
}

ReadingSocket::~ReadingSocket() { t_reading = previous_; }

bool reading_now(const Socket* c) { return t_reading == c; }

}  // namespace ringlet::transport::tcp
