// A plain loopback TCP connection (no handshake) for tests that play a stranger or forge frames.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace ringlet::testing {

// Connects to 127.0.0.1:port; returns the descriptor (the caller closes it).
inline int raw_connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (fd >= 0) ::close(fd);
    throw std::runtime_error("cannot connect to 127.0.0.1:" + std::to_string(port));
  }
  return fd;
}

// A socket listening on 127.0.0.1 at an ephemeral port that nobody accepts on: the kernel
// completes connections to it and no byte ever comes back (a port someone else took, or a
// stranger that never answers).
struct RawListener {
  int fd = -1;
  int port = 0;
  RawListener() {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(fd, 4) != 0 || ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      if (fd >= 0) ::close(fd);
      throw std::runtime_error("cannot listen on 127.0.0.1");
    }
    port = ntohs(addr.sin_port);
  }
  ~RawListener() { ::close(fd); }
  RawListener(const RawListener&) = delete;
  RawListener& operator=(const RawListener&) = delete;
};

// Same, for an endpoint written "host:port" (the host must be loopback).
inline int raw_connect(const std::string& endpoint) {
  return raw_connect(std::stoi(endpoint.substr(endpoint.rfind(':') + 1)));
}

}  // namespace ringlet::testing
