#include "transport/tcp/unpaced.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cstring>

namespace ringlet::transport::tcp {
namespace {

// The socket's congestion control algorithm, or "" where it cannot be read.
const char* algorithm_of(int fd) {
  thread_local char name[16];
  socklen_t length = sizeof name - 1;
  std::memset(name, 0, sizeof name);
  if (::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &length) != 0) name[0] = '\0';
  return name;
}

bool ask_for(int fd, const char* algorithm) {
  return ::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, algorithm,
                      static_cast<socklen_t>(std::strlen(algorithm))) == 0;
}

}  // namespace

const char* unpace(int fd) {
  if (std::strcmp(algorithm_of(fd), "bbr") == 0 && !ask_for(fd, "cubic")) ask_for(fd, "reno");
  return algorithm_of(fd);
}

}  // namespace ringlet::transport::tcp
