// How the tcp transport uses its sockets (MeshOptions::tcp): the message size from which a message
// is striped over a peer's sockets, and their kernel buffer sizes.
#pragma once

#include <cstddef>

namespace ringlet::transport::tcp {

struct TcpOptions {
  std::size_t stripe_min_bytes = 256 * 1024;  // smaller messages use the first socket
  int socket_buffer_bytes = 0;                // SO_SNDBUF/SO_RCVBUF; 0 = kernel autotuning
};

}  // namespace ringlet::transport::tcp
