// TcpStore: the Store client of a TcpStoreServer, and the server itself (hosted by rank 0 or a
// launcher). They speak the small request/response protocol of transport/store_wire.h; the
// server validates every header before it reads a body, so a stranger sending garbage or
// claiming a huge length loses its own connection and nothing else. Asio stays inside
// tcp_store.cpp (pimpl), so including this header is cheap.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/deadline.h"
#include "transport/store.h"

namespace ringlet::transport {

inline constexpr std::chrono::milliseconds kDefaultStoreTimeout{60000};

// Serves the store on host:port from its own thread until stop() or destruction. host is a
// local address to bind ("127.0.0.1", "::1", "0.0.0.0", "::" (dual-stack), or a name that
// resolves to one); port 0 picks an ephemeral port, see port(). Throws core::Error naming
// host:port when it cannot bind (e.g. the port is in use), and `port_name`, where the user set
// the port (MASTER_PORT, --rdzv-endpoint), as what to change. Any number of clients may be
// connected; a get/wait parks the request without blocking anyone else.
class TcpStoreServer {
 public:
  TcpStoreServer(const std::string& host, int port, const std::string& port_name = "MASTER_PORT");
  ~TcpStoreServer();  // stop()
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  int port() const;                 // the bound port (the ephemeral one if constructed with 0)
  std::size_t num_clients() const;  // connections open now
  // Waits (polling) until no client is connected or the deadline passes; returns whether idle.
  // Lets the host of the store outlive the other ranks' last requests.
  bool wait_until_idle(core::Deadline deadline) const;
  // Closes the listener and every client connection (pending waits see EOF), then joins the
  // server thread. Idempotent.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A client connection to a TcpStoreServer. The constructor connects, retrying with exponential
// backoff until connect_deadline (so clients may start before the server), else TimeoutError;
// what accepted the connection must answer a first request within 10 s (or `timeout`, if
// shorter), else a TimeoutError says it is no store server.
// Every later call is bounded: set/add/compare_set/delete_key/num_keys by `timeout`; get/wait by
// their deadline plus `timeout`. Failures name host:port and the operation. After a failure the
// next call reconnects (within `timeout`). Thread-safe: calls from several threads serialize on
// one connection.
class TcpStore : public Store {
 public:
  TcpStore(std::string host, int port, core::Deadline connect_deadline,
           std::chrono::milliseconds timeout = kDefaultStoreTimeout);
  ~TcpStore() override;
  TcpStore(const TcpStore&) = delete;
  TcpStore& operator=(const TcpStore&) = delete;

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, core::Deadline deadline) override;
  void wait(const std::vector<std::string>& keys, core::Deadline deadline) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  std::string compare_set(const std::string& key, const std::string& expected,
                          const std::string& desired) override;
  bool delete_key(const std::string& key) override;
  std::int64_t num_keys() override;
  void set_timeout(std::chrono::milliseconds timeout) override;
  std::unique_ptr<Store> another_client(std::chrono::milliseconds timeout) const override;
  std::string address() const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringlet::transport
