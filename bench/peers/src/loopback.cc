// The loopback's own limit for a TCP ring: NP processes on 127.0.0.1, each streaming to its
// right neighbour and reading from its left one at the same time, as a ring all-reduce's
// connections carry data (NP = 2: one stream each way between two processes, a two-way stream
// test). No reduction and no framing: plain blocking send()/recv() of 1 MiB at a time, one
// thread each way. Each process reports the rate its incoming stream reached; the mean over the
// ring is the most busbw a TCP ring over this loopback could reach.
//
// usage: loopback NP SECONDS   prints "links NP seconds S mean_GBps M min_GBps m max_GBps x"
// Every process ends by SIGALRM at 3 x SECONDS + 30 s at the latest, so a stuck ring cannot
// hang its caller; a process that fails makes the run exit 1.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kChunk = 1 << 20;

[[noreturn]] void die(const char* what) {
  std::perror(what);
  std::exit(1);
}

int listen_any(sockaddr_in* addr) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) die("socket");
  *addr = {};
  addr->sin_family = AF_INET;
  addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof *addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(addr), len) != 0 || ::listen(fd, 1) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(addr), &len) != 0) {
    die("bind/listen on 127.0.0.1");
  }
  return fd;
}

int connect_to(const sockaddr_in& addr) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0 || ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    die("connect to 127.0.0.1");
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

// Streams to `out` for `seconds`, then closes its sending side.
void stream_out(int out, double seconds) {
  std::vector<char> buf(kChunk, 1);
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < end) {
    for (size_t done = 0; done < kChunk;) {
      const ssize_t n = ::send(out, buf.data() + done, kChunk - done, MSG_NOSIGNAL);
      if (n <= 0) die("send");
      done += static_cast<size_t>(n);
    }
  }
  ::shutdown(out, SHUT_WR);
}

// Reads `in` until the end of its stream; the rate in GB/s from its first byte to its last.
double stream_in(int in) {
  std::vector<char> buf(kChunk);
  size_t bytes = 0;
  Clock::time_point first{}, last{};
  for (;;) {
    const ssize_t n = ::recv(in, buf.data(), kChunk, 0);
    if (n < 0) die("recv");
    if (n == 0) break;
    if (bytes == 0) first = Clock::now();
    bytes += static_cast<size_t>(n);
    last = Clock::now();
  }
  const double s = std::chrono::duration<double>(last - first).count();
  return s > 0 ? static_cast<double>(bytes) / s / 1e9 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s NP SECONDS\n", argv[0]);
    return 2;
  }
  const int np = std::atoi(argv[1]);
  const double seconds = std::atof(argv[2]);
  if (np < 2 || np > 64 || !(seconds > 0 && seconds <= 600)) {
    std::fprintf(stderr, "loopback: NP must be 2..64 and SECONDS in (0, 600]\n");
    return 2;
  }
  const unsigned limit_s = static_cast<unsigned>(seconds * 3 + 30);
  ::alarm(limit_s);  // inherited by none of the children: each sets its own below
  std::vector<sockaddr_in> addrs(np);
  std::vector<int> listeners(np);
  for (int r = 0; r < np; ++r) listeners[r] = listen_any(&addrs[r]);
  int results[2];
  if (::pipe(results) != 0) die("pipe");
  std::vector<pid_t> children;
  for (int r = 0; r < np; ++r) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("fork");
      for (pid_t c : children) ::kill(c, SIGKILL);
      return 1;
    }
    if (pid > 0) {
      children.push_back(pid);
      continue;
    }
    ::alarm(limit_s);
    const int out = connect_to(addrs[(r + 1) % np]);  // the listen backlog holds it until accept
    const int in = ::accept(listeners[r], nullptr, nullptr);
    if (in < 0) die("accept");
    for (int l : listeners) ::close(l);  // a peer that died is then a refused connection or EOF
    std::thread sender(stream_out, out, seconds);
    const double rate = stream_in(in);
    sender.join();
    if (::write(results[1], &rate, sizeof rate) != sizeof rate) die("write");
    std::_Exit(0);
  }
  for (int l : listeners) ::close(l);
  ::close(results[1]);
  std::vector<double> rates;
  for (double rate; ::read(results[0], &rate, sizeof rate) == sizeof rate;) rates.push_back(rate);
  int failed = 0;
  for (int status; ::wait(&status) > 0;) failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  if (failed != 0 || static_cast<int>(rates.size()) != np) {
    std::fprintf(stderr, "loopback: %d of %d processes failed; %zu of %d rates came back\n", failed,
                 np, rates.size(), np);
    return 1;
  }
  const double mean = std::accumulate(rates.begin(), rates.end(), 0.0) / np;
  std::printf("links %d seconds %.1f mean_GBps %.4f min_GBps %.4f max_GBps %.4f\n", np, seconds,
              mean, *std::min_element(rates.begin(), rates.end()),
              *std::max_element(rates.begin(), rates.end()));
  return 0;
}
