// host_tcp_store, open_store and job_token. HostedStore bundles rank 0's server with its client so
// that one unique_ptr<Store> owns both; it destroys the client first and keeps serving until the
// other ranks have hung up (bounded), so no rank loses the store under its last request.
#include "transport/rendezvous.h"

#include <charconv>
#include <optional>

#include "core/error.h"
#include "core/log.h"
#include "core/random.h"
#include "transport/file_store.h"
#include "transport/tcp/interfaces.h"

namespace ringlet::transport {
namespace {

const char* const kTokenKey = "ringlet/job_token";

class HostedStore : public Store {
 public:
  HostedStore(std::unique_ptr<TcpStoreServer> server, std::unique_ptr<Store> client,
              std::chrono::milliseconds linger)
      : server_(std::move(server)), client_(std::move(client)), linger_(linger) {}

  // The other ranks may still be sending their last requests (e.g. the wait of a final
  // barrier that rank 0 has already passed): serve until they hang up, within the linger.
  ~HostedStore() override {
    client_.reset();
    if (!server_->wait_until_idle(core::Deadline::after(linger_))) {
      core::log(core::LogLevel::warn, "store: stopping the store server with ",
                server_->num_clients(), " clients still connected");
    }
  }

  void set(const std::string& key, const std::string& value) override { client_->set(key, value); }
  std::string get(const std::string& key, core::Deadline deadline) override {
    return client_->get(key, deadline);
  }
  void wait(const std::vector<std::string>& keys, core::Deadline deadline) override {
    client_->wait(keys, deadline);
  }
  std::int64_t add(const std::string& key, std::int64_t delta) override {
    return client_->add(key, delta);
  }
  std::string compare_set(const std::string& key, const std::string& expected,
                          const std::string& desired) override {
    return client_->compare_set(key, expected, desired);
  }
  bool delete_key(const std::string& key) override { return client_->delete_key(key); }
  std::int64_t num_keys() override { return client_->num_keys(); }
  void set_timeout(std::chrono::milliseconds timeout) override { client_->set_timeout(timeout); }
  std::unique_ptr<Store> another_client(std::chrono::milliseconds timeout) const override {
    return client_->another_client(timeout);
  }
  std::string address() const override { return client_->address(); }

 private:
  std::unique_ptr<TcpStoreServer> server_;  // declared first: destroyed after the client
  std::unique_ptr<Store> client_;
  std::chrono::milliseconds linger_;
};

bool store_hosted_by_launcher(const EnvLookup& env) {
  const auto v = env("RINGLET_STORE_HOSTED");
  if (!v || *v == "0") return false;
  RINGLET_CHECK(*v == "1", ValueError, "RINGLET_STORE_HOSTED='", *v, "' must be 0 or 1");
  return true;
}

std::optional<std::uint64_t> parse_token(const std::string& text) {
  std::uint64_t value = 0;
  const bool hex = text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
  const char* begin = text.data() + (hex ? 2 : 0);
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(begin, end, value, hex ? 16 : 10);
  if (begin == end || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

}  // namespace

std::unique_ptr<TcpStoreServer> host_tcp_store(const std::string& addr, int port,
                                               const std::string& port_name) {
  if (tcp::is_loopback_host(addr)) return std::make_unique<TcpStoreServer>(addr, port, port_name);
  try {
    return std::make_unique<TcpStoreServer>("::", port, port_name);
  } catch (const core::Error& e) {
    core::log(core::LogLevel::debug, "store: IPv6 wildcard bind failed (", e.what(),
              "); trying 0.0.0.0");
    return std::make_unique<TcpStoreServer>("0.0.0.0", port, port_name);
  }
}

std::unique_ptr<Store> open_store(const InitInfo& info, core::Deadline deadline,
                                  const EnvLookup& env, std::chrono::milliseconds timeout) {
  if (info.source == "file") {
    return std::make_unique<FileStore>(info.file_path, info.world_size, timeout);
  }
  RINGLET_CHECK(info.source == "tcp" || info.source == "env" || info.source == "slurm" ||
                    info.source == "ompi",
                ValueError, "open_store: unknown InitInfo source '", info.source, "'");
  std::unique_ptr<TcpStoreServer> server;
  if (info.rank == 0 && !store_hosted_by_launcher(env)) {
    server = host_tcp_store(info.master_addr, info.master_port,
                            info.source == "tcp" ? "init_method port" : "MASTER_PORT");
    core::log(core::LogLevel::info, "store: rank 0 hosts the store on port ", server->port(),
              " for ", info.world_size, " ranks (", info.source, " init)");
  }
  auto client = std::make_unique<TcpStore>(info.master_addr, info.master_port, deadline, timeout);
  if (!server) return client;
  return std::make_unique<HostedStore>(std::move(server), std::move(client), timeout);
}

std::uint64_t job_token(Store& store, int rank, core::Deadline deadline, const EnvLookup& env) {
  if (const auto text = env("RINGLET_JOB_TOKEN")) {
    const auto token = parse_token(*text);
    RINGLET_CHECK(token.has_value(), ValueError, "RINGLET_JOB_TOKEN='", *text,
                  "' is not a 64-bit integer (decimal or 0x-hex)");
    // Published too, so that a process started by hand into this job's store reads it and is
    // then refused by name (mesh.h) rather than waiting for a token nobody publishes.
    if (rank == 0) store.compare_set(kTokenKey, "", std::to_string(*token));
    return *token;
  }
  std::string published;
  if (rank == 0) {
    // compare_set keeps the first token if rank 0 asks twice (the others may already use it).
    published = store.compare_set(kTokenKey, "", std::to_string(core::random_u64()));
  } else {
    published = store.get(kTokenKey, deadline);
  }
  const auto token = parse_token(published);
  RINGLET_CHECK(token.has_value(), Error, "store key ", kTokenKey, "='", published,
                "' is not a job token (a stale store from another job?)");
  return *token;
}

}  // namespace ringlet::transport
