// TcpStoreServer and TcpStore (Asio). The server runs one io_context on one thread, so its state
// needs no locks; a get/wait that cannot be answered yet parks on the key it misses until a
// write creates it or its timer fires. Headers are validated before bodies are read, and a body
// buffer grows only as bytes arrive. The client drives a private io_context with
// run_until(deadline), which bounds every socket operation.
#include "transport/tcp_store.h"

#include <algorithm>
#include <array>
#include <asio.hpp>
#include <atomic>
#include <charconv>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

#include "core/error.h"
#include "core/log.h"
#include "core/thread_name.h"
#include "transport/store_wire.h"

namespace ringlet::transport {
namespace {

using asio::ip::tcp;
using namespace store_wire;

std::string host_port(const std::string& host, int port) {
  return host.find(':') != std::string::npos ? core::str("[", host, "]:", port)
                                             : core::str(host, ":", port);
}

std::string strip_brackets(const std::string& host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    return host.substr(1, host.size() - 2);
  }
  return host;
}

std::vector<tcp::endpoint> resolve(asio::io_context& io, const std::string& host, int port,
                                   asio::error_code& ec) {
  std::vector<tcp::endpoint> out;
  const auto address = asio::ip::make_address(strip_brackets(host), ec);
  if (!ec) return {tcp::endpoint(address, static_cast<unsigned short>(port))};
  // A name: the system resolver bounds this lookup (names are rare here: usually a Slurm host).
  tcp::resolver resolver(io);
  const auto results = resolver.resolve(host, std::to_string(port), ec);
  if (!ec) {
    for (const auto& r : results) out.push_back(r.endpoint());
  }
  return out;
}

std::string quoted_list(const Args& keys) {
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "'" : ", '") + k + "'";
  return out;
}

std::string int64_bytes(std::int64_t v) {
  std::string out;
  put_le<std::uint64_t>(out, static_cast<std::uint64_t>(v));
  return out;
}

}  // namespace

// ------------------------------------------------------------------------------------------
// Server

struct TcpStoreServer::Impl {
  struct Session;
  using SessionPtr = std::shared_ptr<Session>;
  struct Waiter {
    std::weak_ptr<Session> session;
    std::uint64_t wait_id;
  };

  struct Session {
    Session(asio::io_context& io, tcp::socket s) : socket(std::move(s)), timer(io) {
      asio::error_code ec;
      const auto ep = socket.remote_endpoint(ec);
      peer = ec ? std::string("?") : host_port(ep.address().to_string(), ep.port());
    }
    tcp::socket socket;
    asio::steady_timer timer;
    std::string peer;
    std::array<unsigned char, kHeaderBytes> header_bytes{};
    std::array<unsigned char, 1> probe{};
    Header header;
    std::vector<unsigned char> body;
    std::string out;
    bool closed = false;
    // A parked get/wait: which keys, which op, and the key it is registered under.
    bool waiting = false;
    std::uint64_t wait_id = 0;
    Op wait_op = Op::wait;
    Args wait_keys;
    std::string registered_key;
  };

  asio::io_context io;
  tcp::acceptor acceptor{io};
  asio::steady_timer accept_retry{io};
  std::thread thread;
  int port = 0;
  bool stopping = false;
  std::set<SessionPtr> sessions;
  std::atomic<std::size_t> num_sessions{0};  // sessions.size(), readable from other threads
  std::map<std::string, std::string> data;
  std::unordered_map<std::string, std::vector<Waiter>> waiters;

  void accept_next() {
    acceptor.async_accept([this](const asio::error_code& ec, tcp::socket socket) {
      if (stopping || ec == asio::error::operation_aborted) return;
      if (ec) {
        // E.g. out of file descriptors: back off instead of spinning on the error.
        core::log(core::LogLevel::warn, "store server: accept failed: ", ec.message());
        accept_retry.expires_after(std::chrono::milliseconds(100));
        accept_retry.async_wait([this](const asio::error_code& e) {
          if (!e && !stopping) accept_next();
        });
        return;
      }
      asio::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      auto session = std::make_shared<Session>(io, std::move(socket));
      sessions.insert(session);
      num_sessions = sessions.size();
      read_header(session);
      accept_next();
    });
  }

  void close(const SessionPtr& s, const std::string& why) {
    if (s->closed) return;
    if (!why.empty()) {
      core::log(core::LogLevel::warn, "store server: closing connection from ", s->peer, ": ", why);
    }
    s->closed = true;
    unpark(s);
    asio::error_code ignored;
    s->socket.close(ignored);
    sessions.erase(s);
    num_sessions = sessions.size();
  }

  void read_header(const SessionPtr& s) {
    asio::async_read(s->socket, asio::buffer(s->header_bytes),
                     [this, s](const asio::error_code& ec, std::size_t) {
                       if (ec) return close(s, "");  // EOF or reset: the client left
                       s->header = decode_header(s->header_bytes.data());
                       const std::string bad = check_request_header(s->header);
                       if (!bad.empty()) return close(s, bad);
                       s->body.clear();
                       read_body(s);
                     });
  }

  // Reads the body in chunks of at most 1 MiB, growing the buffer only as data arrives.
  void read_body(const SessionPtr& s) {
    const std::size_t got = s->body.size();
    if (got == s->header.body_bytes) return on_request(s);
    const std::size_t chunk = std::min<std::size_t>(s->header.body_bytes - got, 1 << 20);
    s->body.resize(got + chunk);
    asio::async_read(s->socket, asio::buffer(s->body.data() + got, chunk),
                     [this, s](const asio::error_code& ec, std::size_t) {
                       if (ec) return close(s, "");
                       read_body(s);
                     });
  }

  void respond(const SessionPtr& s, Status status, const std::vector<std::string_view>& args) {
    s->out = encode_frame(static_cast<std::uint8_t>(status), args, 0);
    asio::async_write(s->socket, asio::buffer(s->out),
                      [this, s](const asio::error_code& ec, std::size_t) {
                        if (ec) return close(s, "");
                        read_header(s);
                      });
  }

  void on_request(const SessionPtr& s) {
    const auto op = static_cast<Op>(s->header.code);
    Args args;
    if (!parse_body(
            s->body, s->header.count, [op](std::size_t i) { return arg_limit(op, i); }, args)) {
      return close(s, "malformed request body");
    }
    s->body = {};
    const std::string& key = op == Op::num_keys ? std::string() : args[0];
    switch (op) {
      case Op::set:
        data[key] = std::move(args[1]);
        respond(s, Status::ok, {});
        return notify(key);
      case Op::get:
      case Op::wait: return park(s, op, std::move(args), s->header.timeout_ms);
      case Op::add: {
        std::int64_t current = 0;
        const auto it = data.find(key);
        if (it != data.end()) {
          const auto& v = it->second;
          const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), current);
          if (ec != std::errc() || end != v.data() + v.size() || v.empty()) {
            const std::string msg = core::str("add: the value of key '", key,
                                              "' is not an integer: '", v.substr(0, 64), "'");
            return respond(s, Status::error, {msg});
          }
        }
        if (args[1].size() != 8) return close(s, "add with a delta that is not 8 bytes");
        const auto delta = static_cast<std::int64_t>(
            get_le<std::uint64_t>(reinterpret_cast<const unsigned char*>(args[1].data())));
        std::int64_t result = 0;
        if (__builtin_add_overflow(current, delta, &result)) {
          return respond(s, Status::error, {core::str("add on key '", key, "' overflows")});
        }
        data[key] = std::to_string(result);
        respond(s, Status::ok, {int64_bytes(result)});
        return notify(key);
      }
      case Op::compare_set: {
        const auto it = data.find(key);
        const bool match = it == data.end() ? args[1].empty() : it->second == args[1];
        if (!match) return respond(s, Status::ok, {it == data.end() ? "" : it->second});
        auto& slot = data[key];
        slot = std::move(args[2]);
        respond(s, Status::ok, {slot});
        return notify(key);
      }
      case Op::delete_key: {
        const bool existed = data.erase(key) > 0;
        return respond(s, Status::ok, {existed ? "\x01" : std::string_view("\0", 1)});
      }
      case Op::num_keys:
        return respond(s, Status::ok, {int64_bytes(static_cast<std::int64_t>(data.size()))});
    }
  }

  // --- parked get/wait ---

  void park(const SessionPtr& s, Op op, Args keys, std::uint64_t timeout_ms) {
    s->waiting = true;
    s->wait_op = op;
    s->wait_keys = std::move(keys);
    const std::uint64_t id = ++s->wait_id;
    if (!register_or_finish(s)) return;
    // Watch the socket while parked, so a client that dies mid-wait is dropped at once rather
    // than when its key appears or its timer fires. unpark() cancels the watch.
    s->socket.async_read_some(asio::buffer(s->probe),
                              [this, s](const asio::error_code& ec, std::size_t) {
                                if (ec == asio::error::operation_aborted || s->closed) return;
                                close(s, ec ? "" : "sent data while its request was pending");
                              });
    if (timeout_ms == kNoTimeout) return;
    // Clamp so the timer arithmetic cannot overflow; a year is "no deadline" in practice.
    s->timer.expires_after(std::chrono::milliseconds(
        std::min<std::uint64_t>(timeout_ms, std::uint64_t{365} * 24 * 3600 * 1000)));
    s->timer.async_wait([this, s, id](const asio::error_code& ec) {
      if (ec || !s->waiting || s->wait_id != id || s->closed) return;
      unpark(s);
      Args missing;
      for (const auto& k : s->wait_keys) {
        if (!data.count(k)) missing.push_back(k);
      }
      std::vector<std::string_view> views(missing.begin(), missing.end());
      respond(s, Status::timeout, views);
    });
  }

  // Answers the parked request if all its keys exist (returns false), else registers it under
  // the first missing key (returns true).
  bool register_or_finish(const SessionPtr& s) {
    for (const auto& k : s->wait_keys) {
      if (!data.count(k)) {
        waiters[k].push_back({s, s->wait_id});
        s->registered_key = k;
        return true;
      }
    }
    unpark(s);
    if (s->wait_op == Op::get) {
      respond(s, Status::ok, {data[s->wait_keys[0]]});
    } else {
      respond(s, Status::ok, {});
    }
    return false;
  }

  void unpark(const SessionPtr& s) {
    if (!s->waiting) return;
    s->waiting = false;
    s->timer.cancel();
    asio::error_code ignored;
    s->socket.cancel(ignored);  // the probe started by park()
    const auto it = waiters.find(s->registered_key);
    if (it != waiters.end()) {
      auto& list = it->second;
      list.erase(std::remove_if(list.begin(), list.end(),
                                [&](const Waiter& w) {
                                  const auto p = w.session.lock();
                                  return !p || p == s;
                                }),
                 list.end());
      if (list.empty()) waiters.erase(it);
    }
    s->registered_key.clear();
  }

  void notify(const std::string& key) {
    const auto it = waiters.find(key);
    if (it == waiters.end()) return;
    const std::vector<Waiter> list = std::move(it->second);
    waiters.erase(it);
    for (const auto& w : list) {
      const auto s = w.session.lock();
      if (s && s->waiting && !s->closed && s->wait_id == w.wait_id) register_or_finish(s);
    }
  }

  void shutdown() {
    stopping = true;
    asio::error_code ignored;
    acceptor.close(ignored);
    accept_retry.cancel();
    const auto all = sessions;
    for (const auto& s : all) close(s, "");
    waiters.clear();
    io.stop();
  }
};

TcpStoreServer::TcpStoreServer(const std::string& host, int port, const std::string& port_name)
    : impl_(new Impl) {
  RINGLET_CHECK(port >= 0 && port <= 65535, ValueError, "store server: port ", port,
                " is out of range [0, 65535]");
  asio::error_code ec;
  const auto endpoints = resolve(impl_->io, host, port, ec);
  RINGLET_CHECK(!ec && !endpoints.empty(), Error, "store server: cannot resolve '", host,
                "': ", ec.message());
  std::string last_error;
  for (const auto& ep : endpoints) {
    auto& acc = impl_->acceptor;
    acc.close(ec);
    if (acc.open(ep.protocol(), ec)) {
      last_error = ec.message();
      continue;
    }
    acc.set_option(tcp::acceptor::reuse_address(true), ec);
    // "::" serves IPv4 clients too, like torch's store, unless the system forbids it.
    if (ep.address().is_v6() && ep.address().is_unspecified()) {
      acc.set_option(asio::ip::v6_only(false), ec);
    }
    if (acc.bind(ep, ec) || acc.listen(asio::socket_base::max_listen_connections, ec)) {
      last_error = ec.message();
      acc.close(ec);
      continue;
    }
    impl_->port = acc.local_endpoint(ec).port();
    break;
  }
  RINGLET_CHECK(impl_->acceptor.is_open(), Error, "store server: cannot listen on ",
                host_port(strip_brackets(host), port), ": ", last_error,
                port != 0 ? core::str(" (is another job or a stale process using this port? "
                                      "choose another ",
                                      port_name, ")")
                          : std::string());
  impl_->accept_next();
  impl_->thread = std::thread([impl = impl_.get()] {
    core::name_this_thread("rl-store");
    // Handlers do not throw by design; if one does (e.g. bad_alloc), log it and keep serving.
    for (int failures = 0; failures < 1000; ++failures) {
      try {
        impl->io.run();
        return;
      } catch (const std::exception& e) {
        core::log(core::LogLevel::error, "store server: handler failed: ", e.what());
      }
    }
  });
  core::log(core::LogLevel::debug, "store server listening on ",
            host_port(strip_brackets(host), impl_->port));
}

TcpStoreServer::~TcpStoreServer() { stop(); }

int TcpStoreServer::port() const { return impl_->port; }

std::size_t TcpStoreServer::num_clients() const { return impl_->num_sessions.load(); }

bool TcpStoreServer::wait_until_idle(core::Deadline deadline) const {
  while (impl_->num_sessions.load() > 0) {
    if (deadline.expired()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

void TcpStoreServer::stop() {
  if (!impl_->thread.joinable()) return;
  asio::post(impl_->io, [impl = impl_.get()] { impl->shutdown(); });
  impl_->thread.join();
}

// ------------------------------------------------------------------------------------------
// Client

// How long a new connection's first request may wait for its answer.
constexpr std::chrono::milliseconds kFirstAnswer{10000};

struct TcpStore::Impl {
  std::string host;
  int port = 0;
  std::string endpoint;  // "host:port" for messages
  std::chrono::milliseconds timeout;
  std::mutex mutex;
  asio::io_context io;
  tcp::socket socket{io};
  bool connected = false;

  void drop() {
    asio::error_code ignored;
    socket.close(ignored);
    connected = false;
  }

  // Runs one asynchronous operation started by `start` until it completes or `deadline`
  // passes; a timeout or an error drops the connection and throws.
  template <class Start>
  void step(Start&& start, core::Deadline deadline, const std::string& what) {
    asio::error_code result;
    bool done = false;
    const auto began = std::chrono::steady_clock::now();
    start([&](const asio::error_code& ec, std::size_t = 0) {
      result = ec;
      done = true;
    });
    io.restart();
    io.run_until(deadline.at());
    if (!done) {
      drop();  // cancels the operation; run its handler so nothing refers to this frame
      io.restart();
      io.run();
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now() - began)
                          .count();
      RINGLET_THROW(TimeoutError, "store ", endpoint, ": ", what, " got no answer within ", ms,
                    " ms (is the store server alive?)");
    }
    if (result) {
      drop();
      const bool gone = result == asio::error::eof || result == asio::error::connection_reset ||
                        result == asio::error::broken_pipe;
      RINGLET_THROW(Error, "store ", endpoint, ": ", what, " failed: ", result.message(),
                    gone ? " (the store server closed the connection: it stopped or died)" : "");
    }
  }

  void connect(core::Deadline deadline) {
    auto backoff = std::chrono::milliseconds(10);
    std::string last_error = "none";
    const auto began = std::chrono::steady_clock::now();
    for (int attempt = 1;; ++attempt) {
      asio::error_code ec;
      const auto endpoints = resolve(io, host, port, ec);
      if (ec) last_error = "cannot resolve: " + ec.message();
      for (const auto& ep : endpoints) {
        drop();
        // One attempt may not outlive the deadline, nor hang longer than the op timeout.
        const auto attempt =
            deadline.remaining() < timeout ? deadline : core::Deadline::after(timeout);
        try {
          step([&](auto handler) { socket.async_connect(ep, handler); }, attempt, "connect");
        } catch (const core::Error& e) {
          last_error = e.what();
          continue;
        }
        socket.set_option(tcp::no_delay(true), ec);
        connected = true;
        expect_answers();
        return;
      }
      if (deadline.expired()) {
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now() - began)
                            .count();
        RINGLET_THROW(TimeoutError, "store client: could not connect to ", endpoint, " within ", ms,
                      " ms after ", attempt, " attempts; last error: ", last_error);
      }
      std::this_thread::sleep_for(
          std::min<std::chrono::steady_clock::duration>(backoff, deadline.remaining()));
      backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
    }
  }

  struct Response {
    Status status;
    Args args;
  };

  // Whatever accepted the connection answers a first request (num_keys) at once, or it is not a
  // store server: a stranger on the port that accepts and stays silent would otherwise hold
  // every call until its timeout, and a rendezvous until its deadline.
  void expect_answers() {
    const auto limit = std::min(timeout, kFirstAnswer);
    try {
      transact(Op::num_keys, {}, 0, core::Deadline::after(limit), "num_keys (the first request)");
    } catch (const core::TimeoutError&) {
      RINGLET_THROW(TimeoutError, "store ", endpoint, ": accepted the connection but answered no ",
                    "request within ", limit.count(),
                    " ms: is something other than a ringlet store server listening there?");
    }
  }

  // One request/response exchange; `io_deadline` bounds all of its socket operations.
  Response transact(Op op, const std::vector<std::string_view>& args, std::uint64_t timeout_ms,
                    core::Deadline io_deadline, const std::string& what) {
    if (!connected) connect(core::Deadline::after(timeout));
    const std::string frame = encode_frame(static_cast<std::uint8_t>(op), args, timeout_ms);
    step([&](auto h) { asio::async_write(socket, asio::buffer(frame), h); }, io_deadline,
         what + " (sending)");
    std::array<unsigned char, kHeaderBytes> hb{};
    step([&](auto h) { asio::async_read(socket, asio::buffer(hb), h); }, io_deadline,
         what + " (awaiting the reply)");
    const Header h = decode_header(hb.data());
    if (const std::string bad = check_reply_header(h); !bad.empty()) {
      drop();
      RINGLET_THROW(Error, "store ", endpoint, ": ", what, ": malformed reply header (", bad,
                    "; is this a ringlet store server?)");
    }
    std::vector<unsigned char> body(h.body_bytes);
    step([&](auto handler) { asio::async_read(socket, asio::buffer(body), handler); }, io_deadline,
         what + " (reading the reply)");
    Response r{static_cast<Status>(h.code), {}};
    if (!parse_body(
            body, h.count, [](std::size_t) { return kMaxValueBytes; }, r.args)) {
      drop();
      RINGLET_THROW(Error, "store ", endpoint, ": ", what, ": malformed reply body");
    }
    if (r.status == Status::error) {
      RINGLET_THROW(Error, "store ", endpoint, ": ", what,
                    " refused: ", r.args.empty() ? std::string("?") : r.args[0]);
    }
    return r;
  }

  Response call(Op op, const std::vector<std::string_view>& args, const std::string& what,
                std::size_t expect_args) {
    for (std::size_t i = 0; i < args.size(); ++i) {
      const std::size_t limit = arg_limit(op, i);
      RINGLET_CHECK(args[i].size() <= limit, ValueError, "store ", endpoint, ": ", what,
                    ": argument ", i, " has ", args[i].size(), " bytes, the limit is ", limit);
    }
    std::lock_guard lock(mutex);
    auto r = transact(op, args, 0, core::Deadline::after(timeout), what);
    const std::size_t want_bytes = op == Op::delete_key ? 1 : 8;  // add, num_keys: an i64
    const bool sized = op == Op::set || op == Op::compare_set;
    if (r.args.size() != expect_args ||
        (expect_args == 1 && !sized && r.args[0].size() != want_bytes)) {
      drop();
      RINGLET_THROW(Error, "store ", endpoint, ": ", what, ": unexpected reply");
    }
    return r;
  }

  // get/wait: the server waits until `deadline`; the socket gets `timeout` more to answer.
  Response call_wait(Op op, const Args& keys, core::Deadline deadline, const std::string& what) {
    RINGLET_CHECK(!keys.empty() && keys.size() <= kMaxWaitKeys, ValueError, "store ", endpoint,
                  ": ", what, ": between 1 and ", kMaxWaitKeys, " keys, got ", keys.size());
    std::vector<std::string_view> views;
    for (const auto& k : keys) {
      RINGLET_CHECK(k.size() <= kMaxKeyBytes, ValueError, "store ", endpoint, ": ", what,
                    ": a key of ", k.size(), " bytes exceeds the limit of ", kMaxKeyBytes);
      views.push_back(k);
    }
    const bool never = deadline.at() == core::Deadline::never().at();
    const auto remaining =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline.remaining());
    std::lock_guard lock(mutex);
    const auto io_deadline =
        never ? core::Deadline::never() : core::Deadline::after(deadline.remaining() + timeout);
    auto r = transact(op, views, never ? kNoTimeout : static_cast<std::uint64_t>(remaining.count()),
                      io_deadline, what);
    if (r.status == Status::timeout) {
      RINGLET_THROW(TimeoutError, "store ", endpoint, ": ", what, " timed out after ",
                    remaining.count(), " ms; missing key(s): ", quoted_list(r.args));
    }
    if (r.args.size() != (op == Op::get ? 1u : 0u)) {
      drop();
      RINGLET_THROW(Error, "store ", endpoint, ": ", what, ": unexpected reply");
    }
    return r;
  }
};

TcpStore::TcpStore(std::string host, int port, core::Deadline connect_deadline,
                   std::chrono::milliseconds timeout)
    : impl_(new Impl) {
  RINGLET_CHECK(port >= 1 && port <= 65535, ValueError, "store client: port ", port,
                " is out of range [1, 65535]");
  impl_->host = strip_brackets(host);
  impl_->port = port;
  impl_->endpoint = host_port(impl_->host, port);
  impl_->timeout = timeout;
  std::lock_guard lock(impl_->mutex);
  impl_->connect(connect_deadline);
}

TcpStore::~TcpStore() = default;

void TcpStore::set(const std::string& key, const std::string& value) {
  impl_->call(Op::set, {key, value}, core::str("set('", key, "')"), 0);
}

std::string TcpStore::get(const std::string& key, core::Deadline deadline) {
  return std::move(
      impl_->call_wait(Op::get, {key}, deadline, core::str("get('", key, "')")).args[0]);
}

void TcpStore::wait(const std::vector<std::string>& keys, core::Deadline deadline) {
  impl_->call_wait(Op::wait, keys, deadline, core::str("wait(", quoted_list(keys), ")"));
}

std::int64_t TcpStore::add(const std::string& key, std::int64_t delta) {
  const auto r = impl_->call(Op::add, {key, int64_bytes(delta)},
                             core::str("add('", key, "', ", delta, ")"), 1);
  return static_cast<std::int64_t>(
      get_le<std::uint64_t>(reinterpret_cast<const unsigned char*>(r.args[0].data())));
}

std::string TcpStore::compare_set(const std::string& key, const std::string& expected,
                                  const std::string& desired) {
  return std::move(impl_
                       ->call(Op::compare_set, {key, expected, desired},
                              core::str("compare_set('", key, "')"), 1)
                       .args[0]);
}

bool TcpStore::delete_key(const std::string& key) {
  const auto r = impl_->call(Op::delete_key, {key}, core::str("delete_key('", key, "')"), 1);
  return r.args[0] == "\x01";
}

std::int64_t TcpStore::num_keys() {
  const auto r = impl_->call(Op::num_keys, {}, "num_keys()", 1);
  return static_cast<std::int64_t>(
      get_le<std::uint64_t>(reinterpret_cast<const unsigned char*>(r.args[0].data())));
}

void TcpStore::set_timeout(std::chrono::milliseconds timeout) {
  std::lock_guard lock(impl_->mutex);
  impl_->timeout = timeout;
}

std::unique_ptr<Store> TcpStore::another_client(std::chrono::milliseconds timeout) const {
  return std::make_unique<TcpStore>(impl_->host, impl_->port, core::Deadline::after(timeout),
                                    timeout);
}

std::string TcpStore::address() const { return impl_->endpoint; }

}  // namespace ringlet::transport
