#include "transport/tcp/unpaced.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cstring>

namespace ringlet::transport::tcp {
namespace {

// The socket's congestion control algorithm, or "" where it cannot be read.
std::string algorithm_of(int fd) {
  char name[16] = {};
  socklen_t length = sizeof name - 1;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &length) != 0) return "";
  return name;
}

bool ask_for(int fd, const char* algorithm) {
  return ::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, algorithm,
                      static_cast<socklen_t>(std::strlen(algorithm))) == 0;
}

}  // namespace

std::string unpace(int fd) {
  if (algorithm_of(fd) == "bbr" && !ask_for(fd, "cubic")) ask_for(fd, "reno");
  return algorithm_of(fd);
}

}  // namespace ringlet::transport::tcp
