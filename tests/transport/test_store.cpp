// Store tests: every Store behaviour runs against TcpStore over IPv4 loopback, over IPv6
// loopback when the host has it, and against FileStore in a temp dir; then the TCP-only
// failures (server not yet up, server gone, strangers sending garbage) and rendezvous. Ranks
// are threads; sockets stay on 127.0.0.1 / ::1; every wait has a deadline.
#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <thread>

#include "core/error.h"
#include "ipv6.h"
#include "raw_socket.h"
#include "temp_dir.h"
#include "transport/file_store.h"
#include "transport/rendezvous.h"
#include "transport/store_wire.h"
#include "transport/tcp_store.h"

using namespace ringlet;
using namespace ringlet::transport;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

using ringlet::testing::TempDir;

doctest::Contains contains(const std::string& text) { return doctest::Contains(text.c_str()); }

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// One store under test: a way to open a fresh client, and what keeps its backing alive.
struct Backend {
  std::string name;
  std::function<std::unique_ptr<Store>()> open;
  std::shared_ptr<void> keep_alive;
};

// Every backend: TcpStore over IPv4 loopback, over IPv6 loopback where the machine has one
// (the "TcpStore over IPv6 loopback" case says so where it has not), and FileStore.
std::vector<Backend> backends() {
  std::vector<Backend> out;
  std::vector<std::string> hosts = {"127.0.0.1"};
  if (has_ipv6_loopback()) hosts.push_back("::1");
  for (const std::string& host : hosts) {
    std::shared_ptr<TcpStoreServer> server = std::make_shared<TcpStoreServer>(host, 0);
    const int port = server->port();
    out.push_back({"tcp " + host,
                   [host, port] {
                     return std::make_unique<TcpStore>(host, port, core::Deadline::after(5s), 5s);
                   },
                   server});
  }
  auto dir = std::make_shared<TempDir>();
  const std::string file = (dir->path / "store").string();
  out.push_back({"file", [file] { return std::make_unique<FileStore>(file, 0, 5s); }, dir});
  return out;
}

}  // namespace

TEST_CASE("store: set/get, overwrite, binary values, delete_key, num_keys") {
  for (const auto& b : backends()) {
    CAPTURE(b.name);
    auto s = b.open();
    CHECK(s->num_keys() == 0);
    s->set("a", "1");
    s->set("a", "2");
    const std::string binary("\0\xff\n ok", 6);
    s->set("bin", binary);
    s->set("empty", "");
    const std::string big(1 << 20, 'x');
    s->set("big", big);
    CHECK(s->get("a", core::Deadline::after(1s)) == "2");
    CHECK(s->get("bin", core::Deadline::after(1s)) == binary);
    CHECK(s->get("empty", core::Deadline::after(1s)).empty());
    CHECK(s->get("big", core::Deadline::after(1s)) == big);
    CHECK(s->num_keys() == 4);
    CHECK(s->delete_key("a"));
    CHECK_FALSE(s->delete_key("a"));
    CHECK(s->num_keys() == 3);
    auto other = b.open();  // a second client sees the same state
    CHECK(other->get("bin", core::Deadline::after(1s)) == binary);
    CHECK(other->num_keys() == 3);
  }
}

TEST_CASE("TcpStore over IPv6 loopback" * doctest::skip(!has_ipv6_loopback()) *
          doctest::description("needs an IPv6 loopback address (::1)")) {
  TcpStoreServer server("::1", 0);
  TcpStore store("::1", server.port(), core::Deadline::after(5s), 5s);
  store.set("k", "v6");
  CHECK(store.get("k", core::Deadline::after(1s)) == "v6");
}

TEST_CASE("store: get waits for a set from another thread") {
  for (const auto& b : backends()) {
    CAPTURE(b.name);
    auto reader = b.open();
    auto writer = b.open();
    const auto start = Clock::now();
    std::thread t([&] {
      std::this_thread::sleep_for(100ms);
      writer->set("late", "here");
    });
    CHECK(reader->get("late", core::Deadline::after(5s)) == "here");
    CHECK(seconds_since(start) >= 0.09);
    t.join();
    reader->wait({"late"}, core::Deadline::after(1s));  // already there: returns at once
  }
}

TEST_CASE("store: wait and get time out at the deadline naming the missing key") {
  for (const auto& b : backends()) {
    CAPTURE(b.name);
    auto s = b.open();
    s->set("present", "1");
    auto start = Clock::now();
    try {
      s->wait({"present", "absent"}, core::Deadline::after(200ms));
      FAIL("wait returned although 'absent' was never set");
    } catch (const core::TimeoutError& e) {
      const std::string msg = e.what();
      const auto missing = msg.find("missing key(s): ");
      REQUIRE(missing != std::string::npos);
      CHECK(msg.find("'absent'", missing) != std::string::npos);
      CHECK(msg.find("'present'", missing) == std::string::npos);
    }
    CHECK(seconds_since(start) >= 0.19);
    CHECK(seconds_since(start) < 2.0);
    start = Clock::now();
    CHECK_THROWS_WITH_AS(s->get("nope", core::Deadline::after(100ms)), contains("'nope'"),
                         core::TimeoutError);
    CHECK(seconds_since(start) < 2.0);
    CHECK(s->get("present", core::Deadline::after(0ms)) == "1");  // present beats a past deadline
  }
}

TEST_CASE("store: add from 8 concurrent clients x 100 is exact and atomic") {
  for (const auto& b : backends()) {
    CAPTURE(b.name);
    constexpr int kThreads = 8, kAdds = 100;
    std::vector<std::vector<std::int64_t>> seen(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        auto s = b.open();
        for (int i = 0; i < kAdds; ++i) seen[t].push_back(s->add("counter", 1));
      });
    }
    for (auto& t : threads) t.join();
    auto s = b.open();
    CHECK(s->add("counter", 0) == kThreads * kAdds);
    CHECK(s->get("counter", core::Deadline::after(1s)) == std::to_string(kThreads * kAdds));
    // Every intermediate result was handed out exactly once.
    std::vector<std::int64_t> all;
    for (const auto& v : seen) all.insert(all.end(), v.begin(), v.end());
    std::sort(all.begin(), all.end());
    bool one_to_n = all.size() == kThreads * kAdds;
    for (std::size_t i = 0; one_to_n && i < all.size(); ++i) one_to_n = all[i] == int(i) + 1;
    CHECK(one_to_n);
    CHECK(s->add("neg", -5) == -5);
    s->set("text", "abc");
    CHECK_THROWS_WITH_AS(s->add("text", 1), contains("not an integer"), core::Error);
  }
}

TEST_CASE("store: compare_set semantics") {
  for (const auto& b : backends()) {
    CAPTURE(b.name);
    auto s = b.open();
    CHECK(s->compare_set("k", "x", "y").empty());  // absent, expected non-empty: no change
    CHECK(s->num_keys() == 0);
    CHECK(s->compare_set("k", "", "first") == "first");  // absent matches empty expected
    CHECK(s->compare_set("k", "wrong", "second") == "first");
    CHECK(s->compare_set("k", "first", "second") == "second");
    CHECK(s->get("k", core::Deadline::after(1s)) == "second");
  }
}

TEST_CASE("store: store_barrier with 4 threads, several rounds, and its timeout") {
  for (const auto& b : backends()) {
    CAPTURE(b.name);
    constexpr int kRanks = 4;
    std::atomic<int> arrived[3] = {0, 0, 0};
    std::atomic<int> early{0};
    std::vector<std::thread> threads;
    for (int r = 0; r < kRanks; ++r) {
      threads.emplace_back([&, r] {
        auto s = b.open();
        for (int round = 0; round < 3; ++round) {
          if (r == round) std::this_thread::sleep_for(50ms);  // a late rank each round
          arrived[round]++;
          store_barrier(*s, "barrier/" + std::to_string(round), kRanks, core::Deadline::after(5s));
          if (arrived[round].load() != kRanks) early++;
        }
      });
    }
    for (auto& t : threads) t.join();
    CHECK(early.load() == 0);
    auto s = b.open();
    const auto start = Clock::now();
    CHECK_THROWS_WITH_AS(store_barrier(*s, "lonely", 2, core::Deadline::after(100ms)),
                         contains("1 of 2"), core::TimeoutError);
    CHECK(seconds_since(start) < 2.0);
  }
}

TEST_CASE("tcp store: a client started before the server connects by retrying") {
  int port = 0;
  {
    TcpStoreServer probe("127.0.0.1", 0);  // find a free port, then free it
    port = probe.port();
  }
  std::string error;
  std::thread client([&] {
    try {
      TcpStore s("127.0.0.1", port, core::Deadline::after(5s), 2s);
      s.set("hello", "world");
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  std::this_thread::sleep_for(300ms);
  TcpStoreServer server("127.0.0.1", port);
  client.join();
  CHECK(error.empty());
  TcpStore check("127.0.0.1", port, core::Deadline::after(2s), 2s);
  CHECK(check.get("hello", core::Deadline::after(1s)) == "world");
  // Nothing listening and a short deadline: a TimeoutError naming the endpoint.
  server.stop();
  const auto start = Clock::now();
  CHECK_THROWS_WITH_AS(TcpStore("127.0.0.1", port, core::Deadline::after(200ms), 1s),
                       contains("127.0.0.1:" + std::to_string(port)), core::TimeoutError);
  CHECK(seconds_since(start) < 2.0);
}

TEST_CASE("tcp store: a second server on a busy port fails naming it") {
  TcpStoreServer first("127.0.0.1", 0);
  CHECK_THROWS_WITH_AS(TcpStoreServer("127.0.0.1", first.port()),
                       contains(std::to_string(first.port())), core::Error);
}

TEST_CASE(
    "tcp store: a stranger on the port that accepts and never answers is named within 10 s, not "
    "held to the 60 s timeout or the connect deadline") {
  const testing::RawListener stranger;
  const int port = stranger.port;
  const auto start = Clock::now();
  CHECK_THROWS_WITH_AS(TcpStore("127.0.0.1", port, core::Deadline::after(120s), 60s),
                       contains("127.0.0.1:" + std::to_string(port) +
                                ": accepted the connection but answered no request within 10000 "
                                "ms"),
                       core::TimeoutError);
  CHECK(seconds_since(start) < 20.0);
  CHECK(seconds_since(start) > 9.0);
}

TEST_CASE("tcp store: host_tcp_store binds a loopback address as given, anything else widely") {
  const auto reaches = [](const std::string& host, int port) {
    try {
      TcpStore client(host, port, core::Deadline::after(300ms), 1s);
      client.set("k", "v");
      return true;
    } catch (const core::TimeoutError&) {
      return false;
    }
  };
  // 127.0.0.2 is loopback: bound alone, so 127.0.0.1 finds nothing on that port.
  auto only = host_tcp_store("127.0.0.2", 0);
  CHECK(reaches("127.0.0.2", only->port()));
  CHECK_FALSE(reaches("127.0.0.1", only->port()));
  // A host name other ranks resolve: every interface, loopback included.
  auto wide = host_tcp_store("trainer-node.invalid", 0);
  CHECK(reaches("127.0.0.1", wide->port()));
  CHECK(reaches("127.0.0.2", wide->port()));
}

TEST_CASE("tcp store: a stopped server gives a clear error within the timeout") {
  auto server = std::make_unique<TcpStoreServer>("127.0.0.1", 0);
  const int port = server->port();
  const std::string endpoint = "127.0.0.1:" + std::to_string(port);
  TcpStore waiter("127.0.0.1", port, core::Deadline::after(2s), 1s);
  TcpStore client("127.0.0.1", port, core::Deadline::after(2s), 1s);
  client.set("k", "v");
  // A get parked on the server when it stops fails at once instead of waiting 10 s.
  std::string wait_error;
  double wait_seconds = 0;
  std::thread t([&] {
    const auto start = Clock::now();
    try {
      waiter.get("never", core::Deadline::after(10s));
    } catch (const core::Error& e) {
      wait_error = e.what();
    }
    wait_seconds = seconds_since(start);
  });
  std::this_thread::sleep_for(100ms);
  server->stop();
  t.join();
  CHECK(wait_error.find(endpoint) != std::string::npos);
  CHECK(wait_error.find("get('never')") != std::string::npos);
  CHECK(wait_seconds < 2.0);
  auto start = Clock::now();
  CHECK_THROWS_WITH_AS(client.set("k", "v2"), contains(endpoint), core::Error);
  CHECK(seconds_since(start) < 3.0);
  start = Clock::now();  // the next call tries to reconnect, bounded by the 1 s timeout
  CHECK_THROWS_WITH_AS(client.add("n", 1), contains(endpoint), core::TimeoutError);
  CHECK(seconds_since(start) < 3.0);
}

namespace {

// A raw loopback TCP client for forging frames; receive bounded by SO_RCVTIMEO.
struct RawClient {
  int fd = -1;
  explicit RawClient(int port) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    timeval tv{2, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  }
  ~RawClient() { ::close(fd); }
  void send(const std::string& bytes) {
    REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == ssize_t(bytes.size()));
  }
  // True when the server closed the connection (EOF or reset) within the receive timeout.
  bool closed_by_server() {
    char c;
    const ssize_t n = ::recv(fd, &c, 1, 0);
    return n == 0 || (n < 0 && errno == ECONNRESET);
  }
};

std::string frame(store_wire::Op op, const std::vector<std::string_view>& args) {
  return store_wire::encode_frame(static_cast<std::uint8_t>(op), args, 0);
}

void patch_u32(std::string& f, std::size_t at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) f[at + i] = static_cast<char>(v >> (8 * i));
}

}  // namespace

TEST_CASE("tcp store: strangers sending garbage lose only their own connection") {
  TcpStoreServer server("127.0.0.1", 0);
  TcpStore good("127.0.0.1", server.port(), core::Deadline::after(2s), 2s);
  good.set("keep", "me");
  RawClient idle(server.port());  // connected and silent: must not block anyone

  std::map<std::string, std::string> attacks;
  attacks["garbage"] = std::string(64, '\xab');
  std::string wrong_magic = frame(store_wire::Op::set, {"k", "v"});
  wrong_magic[0] ^= 0x55;
  attacks["wrong magic"] = wrong_magic;
  std::string wrong_version = frame(store_wire::Op::get, {"k"});
  wrong_version[4] = 99;
  attacks["wrong version"] = wrong_version;
  std::string bad_op = frame(store_wire::Op::get, {"k"});
  bad_op[6] = 42;
  attacks["unknown op"] = bad_op;
  std::string reserved = frame(store_wire::Op::get, {"k"});
  reserved[7] = 1;
  attacks["reserved byte set"] = reserved;
  std::string wait_too_big = frame(store_wire::Op::wait, {"k"});
  patch_u32(wait_too_big, 8, 40000);           // 40000 keys of up to 4 KiB: within the key count,
  patch_u32(wait_too_big, 12, 40000u * 4100);  // but 164 MB is over any body's 128 MiB limit
  attacks["wait body over the frame limit"] = wait_too_big;
  std::string huge = frame(store_wire::Op::set, {"k", "v"});
  patch_u32(huge, 12, 0xfffffff0u);  // body_bytes: ~4 GiB
  attacks["huge body length"] = huge;
  std::string long_key = frame(store_wire::Op::get, {"k"});
  patch_u32(long_key, 12, 4 + 5000);  // a 5000-byte key is over the 4 KiB limit
  attacks["key over limit"] = long_key;
  std::string many = frame(store_wire::Op::wait, {"k"});
  patch_u32(many, 8, 0x7fffffffu);  // count
  attacks["absurd arg count"] = many;
  std::string lying = frame(store_wire::Op::set, {"k", "v"});
  patch_u32(lying, store_wire::kHeaderBytes, 1000);  // key length runs past the body
  attacks["inconsistent body"] = lying;

  for (const auto& entry : attacks) {
    const auto& name = entry.first;
    const auto& bytes = entry.second;
    CAPTURE(name);
    RawClient raw(server.port());
    raw.send(bytes);
    CHECK(raw.closed_by_server());
    CHECK(good.get("keep", core::Deadline::after(1s)) == "me");
  }
  // A valid header promising 60 MiB, then a few bytes and a hang-up: the server buffers only
  // what arrived and drops the connection when it ends.
  {
    RawClient raw(server.port());
    std::string partial = frame(store_wire::Op::set, {"k", "v"});
    patch_u32(partial, 12, 4 + 1 + 4 + (60u << 20));
    raw.send(partial);
  }
  good.set("after", "attacks");
  CHECK(good.get("after", core::Deadline::after(1s)) == "attacks");
  CHECK(good.num_keys() == 2);
  // Oversized arguments are refused on the client side before anything is sent.
  CHECK_THROWS_AS(good.set(std::string(5000, 'k'), "v"), core::ValueError);
}

TEST_CASE("tcp store: a client that dies or misbehaves mid-wait is dropped at once") {
  TcpStoreServer server("127.0.0.1", 0);
  const auto clients_become = [&](std::size_t n) {
    const auto deadline = core::Deadline::after(2s);
    while (server.num_clients() != n && !deadline.expired()) std::this_thread::sleep_for(5ms);
    return server.num_clients() == n;
  };
  const std::string wait_forever = store_wire::encode_frame(
      static_cast<std::uint8_t>(store_wire::Op::wait), {"never"}, store_wire::kNoTimeout);
  {
    RawClient raw(server.port());
    raw.send(wait_forever);
    CHECK(clients_become(1));
  }  // hangs up while parked
  CHECK(server.wait_until_idle(core::Deadline::after(2s)));
  RawClient pushy(server.port());
  pushy.send(wait_forever);
  pushy.send(frame(store_wire::Op::num_keys, {}));  // a second request before the reply
  CHECK(pushy.closed_by_server());
  CHECK(clients_become(0));
}

TEST_CASE("file store: corrupt content is an error naming the file; last close deletes it") {
  TempDir dir;
  const std::string path = (dir.path / "corrupt").string();
  std::ofstream(path) << "definitely not a store";
  CHECK_THROWS_WITH_AS(FileStore(path, 0, 1s), contains(path), core::Error);

  const std::string damaged = (dir.path / "damaged").string();
  {
    FileStore a(damaged, 0, 1s);
    a.set("x", "1");
    std::ofstream(damaged, std::ios::app) << "Z";  // an unknown record type appended
    CHECK_THROWS_WITH_AS(FileStore(damaged, 0, 1s), contains(damaged), core::Error);
    // A FileStore opened earlier finds the damage on its next replay.
    CHECK_THROWS_WITH_AS(a.get("x", core::Deadline::after(1s)), contains(damaged), core::Error);
  }
  const std::string shared = (dir.path / "shared").string();
  {
    FileStore a(shared, 2, 1s);
    FileStore b(shared, 2, 1s);
    a.set("x", "1");
    CHECK(b.get("x", core::Deadline::after(1s)) == "1");
  }
  CHECK_FALSE(std::filesystem::exists(shared));
}

namespace {
EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}
}  // namespace

TEST_CASE("rendezvous: open_store for 3 ranks over tcp and file, and the job token") {
  int port = 0;
  {
    TcpStoreServer probe("127.0.0.1", 0);
    port = probe.port();
  }
  TempDir dir;
  const std::string file = (dir.path / "rdzv").string();
  for (const std::string source : {"tcp", "file"}) {
    CAPTURE(source);
    constexpr int kRanks = 3;
    std::vector<std::uint64_t> tokens(kRanks);
    std::vector<std::string> errors(kRanks);
    std::vector<std::thread> ranks;
    for (int r = 0; r < kRanks; ++r) {
      ranks.emplace_back([&, r] {
        try {
          InitInfo info;
          info.source = source;
          info.rank = r;
          info.world_size = kRanks;
          info.master_addr = "127.0.0.1";
          info.master_port = port;
          info.file_path = file;
          if (r != 0) std::this_thread::sleep_for(20ms * r);
          auto store = open_store(info, core::Deadline::after(5s), env_of({}), 5s);
          tokens[r] = job_token(*store, r, core::Deadline::after(5s), env_of({}));
          store_barrier(*store, "done", kRanks, core::Deadline::after(5s));
        } catch (const std::exception& e) {
          errors[r] = e.what();
        }
      });
    }
    for (auto& t : ranks) t.join();
    for (int r = 0; r < kRanks; ++r) CHECK(errors[r] == "");
    CHECK(tokens[1] == tokens[0]);
    CHECK(tokens[2] == tokens[0]);
  }
  CHECK_FALSE(std::filesystem::exists(file));  // the last rank to close deleted it

  TcpStoreServer server("127.0.0.1", 0);
  TcpStore store("127.0.0.1", server.port(), core::Deadline::after(2s), 2s);
  const auto deadline = core::Deadline::after(1s);
  CHECK(job_token(store, 1, deadline, env_of({{"RINGLET_JOB_TOKEN", "0x1F"}})) == 31);
  CHECK(job_token(store, 0, deadline, env_of({{"RINGLET_JOB_TOKEN", "12345"}})) == 12345);
  CHECK_THROWS_WITH_AS(job_token(store, 0, deadline, env_of({{"RINGLET_JOB_TOKEN", "0xZZ"}})),
                       contains("RINGLET_JOB_TOKEN='0xZZ'"), core::ValueError);
  InitInfo hosted;
  hosted.source = "env";
  hosted.master_addr = "127.0.0.1";
  hosted.master_port = server.port();
  // RINGLET_STORE_HOSTED=1: rank 0 only connects to the launcher's server.
  auto s = open_store(hosted, core::Deadline::after(2s), env_of({{"RINGLET_STORE_HOSTED", "1"}}));
  s->set("from", "rank0");
  CHECK(store.get("from", deadline) == "rank0");
}
