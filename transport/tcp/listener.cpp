// Listener (Asio acceptor on its own io_context thread) and the client side of the handshake.
// Every accepted socket gets kHandshakeTimeout to deliver a whole Hello; a bad one is refused
// (Ack with the reason where it makes sense), logged and closed without affecting others.
#include "transport/tcp/listener.h"

#include <asio.hpp>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "core/log.h"
#include "core/thread_name.h"
#include "transport/errors.h"
#include "transport/tcp/unpaced.h"

namespace ringlet::transport::tcp {
namespace {

constexpr auto kHandshakeTimeout = std::chrono::seconds(10);

asio::ip::address parse_address(const std::string& text) {
  std::string host = text;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host == "localhost") host = "127.0.0.1";
  asio::error_code ec;
  auto addr = asio::ip::make_address(host, ec);
  if (ec) {
    // A name: resolve it (first result).
    asio::io_context io;
    asio::ip::tcp::resolver resolver(io);
    auto results = resolver.resolve(host, "", ec);
    RINGLET_CHECK(!ec && !results.empty(), ValueError, "cannot resolve host '", text,
                  "': ", ec.message());
    addr = results.begin()->endpoint().address();
  }
  return addr;
}

}  // namespace

std::string endpoint_str(const std::string& host, int port) {
  const bool v6 = host.find(':') != std::string::npos && host.front() != '[';
  return v6 ? core::str("[", host, "]:", port) : core::str(host, ":", port);
}

struct Listener::Impl {
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor{io};
  std::thread thread;
  std::string address;
  int port = 0;
  std::uint64_t job_token;
  int local_rank;
  int world_size;
  std::mutex mutex;
  std::condition_variable cv;
  std::map<std::pair<int, int>, int> ready;  // (peer, socket index) -> fd
  std::map<std::pair<int, int>, bool> seen;
  std::uint64_t refused = 0;

  struct Pending {
    asio::ip::tcp::socket socket;
    asio::steady_timer timer;
    Hello hello;
    Ack ack;
    explicit Pending(asio::io_context& io) : socket(io), timer(io) {}
  };

  void accept_next() {
    auto pending = std::make_shared<Pending>(io);
    acceptor.async_accept(pending->socket, [this, pending](const asio::error_code& ec) {
      if (ec == asio::error::operation_aborted) return;
      if (!ec) handshake(pending);
      accept_next();
    });
  }

  void refuse(const std::shared_ptr<Pending>& p, const std::string& why) {
    asio::error_code ignored;
    const auto remote = p->socket.remote_endpoint(ignored);
    core::log(core::LogLevel::warn, "rank ", local_rank, ": refused a connection from ",
              remote.address().to_string(), ":", remote.port(), " on ", endpoint_str(address, port),
              ": ", why);
    std::lock_guard lock(mutex);
    ++refused;
  }

  void handshake(const std::shared_ptr<Pending>& p) {
    p->timer.expires_after(kHandshakeTimeout);
    p->timer.async_wait([p](const asio::error_code& ec) {
      if (!ec) p->socket.close();  // too slow: a silent stranger
    });
    asio::async_read(p->socket, asio::buffer(&p->hello, sizeof(Hello)),
                     [this, p](const asio::error_code& ec, std::size_t) {
                       if (ec) {
                         p->timer.cancel();
                         refuse(p, "no complete handshake (" + ec.message() + ")");
                         return;
                       }
                       on_hello(p);
                     });
  }

  void on_hello(const std::shared_ptr<Pending>& p) {
    if (p->hello.magic != kHelloMagic) {
      p->timer.cancel();
      refuse(p, "not a ringlet peer (bad magic)");
      p->socket.close();
      return;
    }
    AckStatus status = check_hello(p->hello, job_token, local_rank, world_size);
    const auto key =
        std::make_pair(static_cast<int>(p->hello.rank), static_cast<int>(p->hello.socket_index));
    if (status == AckStatus::ok) {
      std::lock_guard lock(mutex);
      if (seen[key]) status = AckStatus::unexpected;  // a duplicate or a replay
      seen[key] = true;
    }
    p->ack.status = status;
    asio::async_write(p->socket, asio::buffer(&p->ack, sizeof(Ack)),
                      [this, p, status, key](const asio::error_code& ec, std::size_t) {
                        p->timer.cancel();
                        if (status != AckStatus::ok) {
                          refuse(p, core::str("rank ", p->hello.rank, ": ", describe(status)));
                          p->socket.close();
                          return;
                        }
                        if (ec) {
                          refuse(p, "handshake write failed: " + ec.message());
                          return;
                        }
                        {
                          std::lock_guard lock(mutex);
                          ready[key] = p->socket.release();
                        }
                        cv.notify_all();
                      });
  }
};

Listener::Listener(const std::string& address, int port, std::uint64_t job_token, int local_rank,
                   int world_size)
    : impl_(std::make_unique<Impl>()) {
  impl_->job_token = job_token;
  impl_->local_rank = local_rank;
  impl_->world_size = world_size;
  const asio::ip::tcp::endpoint endpoint(parse_address(address), static_cast<unsigned short>(port));
  asio::error_code ec;
  impl_->acceptor.open(endpoint.protocol(), ec);
  // Accepted sockets keep the listening socket's congestion control.
  if (!ec && endpoint.address().is_loopback()) unpace(impl_->acceptor.native_handle());
  if (!ec) impl_->acceptor.set_option(asio::ip::tcp::acceptor::reuse_address(true), ec);
  if (!ec) impl_->acceptor.bind(endpoint, ec);
  if (!ec) impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  RINGLET_CHECK(
      !ec, Error, "rank ", local_rank, ": cannot listen on ", endpoint_str(address, port), ": ",
      ec.message(),
      ec == asio::error::address_in_use ? " (the port is taken; choose another or 0)" : "");
  impl_->port = impl_->acceptor.local_endpoint().port();
  impl_->address = address;
  impl_->accept_next();
  impl_->thread = std::thread([impl = impl_.get()] {
    core::name_this_thread("rl-tcp-listen");
    impl->io.run();
  });
}

Listener::~Listener() {
  asio::post(impl_->io, [impl = impl_.get()] {
    asio::error_code ignored;
    impl->acceptor.close(ignored);
  });
  impl_->io.stop();
  impl_->thread.join();
  for (auto& [key, fd] : impl_->ready) ::close(fd);  // never taken
}

const std::string& Listener::address() const { return impl_->address; }
int Listener::port() const { return impl_->port; }

std::uint64_t Listener::refused() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->refused;
}

int Listener::take(int peer_rank, int socket_index, core::Deadline deadline) {
  std::unique_lock lock(impl_->mutex);
  const auto key = std::make_pair(peer_rank, socket_index);
  if (!core::wait_until(impl_->cv, lock, deadline, [&] { return impl_->ready.count(key) != 0; })) {
    RINGLET_THROW(TimeoutError, "rank ", impl_->local_rank, ": rank ", peer_rank,
                  " did not connect socket ", socket_index, " to ",
                  endpoint_str(impl_->address, impl_->port), " before the deadline");
  }
  const int fd = impl_->ready[key];
  impl_->ready.erase(key);
  return fd;
}

int connect_socket(const std::string& host, int port, const Hello& hello, core::Deadline deadline) {
  const asio::ip::tcp::endpoint endpoint(parse_address(host), static_cast<unsigned short>(port));
  auto backoff = std::chrono::milliseconds(10);
  std::string last_error = "no attempt";
  while (!deadline.expired()) {
    asio::io_context io;
    asio::ip::tcp::socket socket(io);
    asio::error_code result = asio::error::timed_out;
    Ack ack;
    asio::error_code opened;
    socket.open(endpoint.protocol(), opened);
    if (!opened && endpoint.address().is_loopback()) unpace(socket.native_handle());
    // connect, send Hello, read Ack — each step bounded by the remaining time
    socket.async_connect(endpoint, [&](const asio::error_code& ec) {
      if (ec) {
        result = ec;
        return;
      }
      asio::async_write(socket, asio::buffer(&hello, sizeof(Hello)),
                        [&](const asio::error_code& wec, std::size_t) {
                          if (wec) {
                            result = wec;
                            return;
                          }
                          asio::async_read(
                              socket, asio::buffer(&ack, sizeof(Ack)),
                              [&](const asio::error_code& rec, std::size_t) { result = rec; });
                        });
    });
    io.run_for(
        std::min<std::chrono::steady_clock::duration>(deadline.remaining(), kHandshakeTimeout));
    if (!result) {
      RINGLET_CHECK(ack.magic == kHelloMagic, HandshakeError, "rank ", hello.rank, ": ",
                    endpoint_str(host, port), " answered the handshake with garbage");
      RINGLET_CHECK(ack.status == AckStatus::ok, HandshakeError, "rank ", hello.rank, ": rank ",
                    hello.peer_rank, " at ", endpoint_str(host, port),
                    " refused the connection: ", describe(ack.status));
      asio::error_code ignored;
      socket.set_option(asio::ip::tcp::no_delay(true), ignored);
      return socket.release();
    }
    last_error = result.message();
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(backoff, deadline.remaining()));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
  RINGLET_THROW(TimeoutError, "rank ", hello.rank, ": could not connect to rank ", hello.peer_rank,
                " at ", endpoint_str(host, port), " before the deadline (last error: ", last_error,
                ")");
}

}  // namespace ringlet::transport::tcp
