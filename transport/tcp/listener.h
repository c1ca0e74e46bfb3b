// The TCP side of rendezvous: a Listener accepts ringlet connections on one address and
// checks each one's handshake on its own thread (a stranger, a wrong job or a garbage sender
// is refused, logged and closed; the listener keeps serving). connect_socket dials a peer's
// listener with retry and backoff until a deadline and performs the client handshake.
// Both hand over plain connected socket descriptors (no Asio in this header).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/deadline.h"
#include "transport/tcp/handshake.h"

namespace ringlet::transport::tcp {

class Listener {
 public:
  // Binds address:port (port 0 = ephemeral) and starts accepting.
  Listener(const std::string& address, int port, std::uint64_t job_token, int local_rank,
           int world_size);
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  const std::string& address() const;
  int port() const;
  // The socket (as a descriptor the caller now owns) that peer_rank opened as socket_index,
  // once its handshake passed; TimeoutError at the deadline naming the missing peer.
  int take(int peer_rank, int socket_index, core::Deadline deadline);
  // Connections refused so far (strangers, wrong job/version, duplicates).
  std::uint64_t refused() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Connects to host:port, sends `hello` and waits for the Ack. Retries refused/unreachable
// connects with exponential backoff until the deadline (TimeoutError naming host:port);
// a refusing Ack is a HandshakeError naming the reason. Returns the connected descriptor.
int connect_socket(const std::string& host, int port, const Hello& hello, core::Deadline deadline);

// "host:port", with brackets for IPv6.
std::string endpoint_str(const std::string& host, int port);

}  // namespace ringlet::transport::tcp
