// One socket of a TcpConnection (connection.cpp): the frame being written to it (SendFrame,
// write_some), the frame being read from it (Reader), its queue, locks and thread (Socket), the
// eventfd that wakes that thread (wake), and which socket the calling thread is reading
// (ReadingSocket, reading_now), so that a failure found while reading does not wait for itself.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>

#include "transport/tcp/handshake.h"

namespace ringlet::transport::tcp {

// The most a joined send's head may hold (TcpConnection::try_send_joined): it travels in the
// frame itself, so the caller's copy may go at once.
inline constexpr std::size_t kJoinedHeadMax = 32;

// A frame's payload is its `head` (head_bytes, usually none) and then `data`.
struct SendFrame {
  FrameHeader header;
  const char* data;
  std::uint64_t seq;
  std::uint64_t written = 0;  // bytes of header + payload already on the socket
  std::array<char, kJoinedHeadMax> head{};
  std::uint32_t head_bytes = 0;

  std::uint64_t bytes() const { return sizeof(FrameHeader) + header.length; }
};

// The frame being read from one socket: its header, then its payload straight into the posted
// buffer. Persists across reads, whoever does them.
struct Reader {
  FrameHeader header;
  std::size_t header_got = 0;  // bytes of `header` read
  bool in_payload = false;
  std::uint64_t seq = 0;     // the frame whose payload is being read (`header` may already
  std::uint64_t length = 0;  // hold the next frame's)
  char* dst = nullptr;       // where the rest of the payload goes
  std::uint64_t left = 0;    // payload bytes still to read
};

// The flags marked "guarded by Impl::mutex" belong to the connection's lock.
struct Socket {
  int fd = -1;
  int wake_fd = -1;  // eventfd: wakes the socket's thread when what it polls for changed
  std::thread thread;
  std::mutex write_mutex;       // guards queue and the socket's write side
  std::deque<SendFrame> queue;  // frames to write, in order; the front may be partly written
  std::mutex read_mutex;        // held by whoever reads the socket; guards reader
  Reader reader;
  bool parked = false;     // the next frame's receive is not posted yet; guarded by Impl::mutex
  bool read_done = false;  // goodbye or failure: nothing more is read; guarded by Impl::mutex
  bool resumed = false;    // unparked: the thread reads the waiting frame once it reads at all
                           // (background receives posted); guarded by Impl::mutex
};

// Writes as much of `f` as the socket takes now. 0, EAGAIN, or the errno of a failure.
int write_some(int fd, SendFrame& f);

// Wakes the socket's thread out of its poll.
void wake(Socket* c);

// Holds a socket's read_mutex and names it as the one this thread reads for as long as it lives.
class ReadingSocket {
 public:
  explicit ReadingSocket(Socket* c);
  ~ReadingSocket();
  ReadingSocket(const ReadingSocket&) = delete;
  ReadingSocket& operator=(const ReadingSocket&) = delete;

 private:
  std::lock_guard<std::mutex> lock_;
  const Socket* previous_;
};

// Whether this thread holds c's read_mutex through a ReadingSocket.
bool reading_now(const Socket* c);

}  // namespace ringlet::transport::tcp
