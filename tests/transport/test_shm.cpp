// shm transport: ranks as threads (rendezvous through an in-memory store) and as processes
// (fork). Sizes 0 .. 64 MiB (larger than the ring), many messages in flight, both directions,
// four ranks all-to-all, oversize messages, a closed / silent / killed peer, and that /dev/shm
// holds nothing of ours once a connection is up; shared windows mapped by a forked peer. Where
// messages lie in the ring (joined sends, receives in place, the ring's start): test_shm_ring.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "connection_checks.h"
#include "memory_store.h"
#include "same_bytes.h"
#include "shm_pair.h"
#include "temp_dir.h"
#include "transport/errors.h"
#include "transport/shared_objects.h"
#include "transport/shm/connection.h"
#include "transport/shm/line_round_trip.h"
#include "transport/shm/window.h"

using namespace ringlet;
using namespace std::chrono_literals;
using testing::exchange;
using testing::expect_peer_error;
using testing::make_shm_pair;
using testing::make_small_ring_pair;
using testing::pattern;
using transport::Connection;
using transport::RequestPtr;

namespace {

const auto kWait = 20s;

}  // namespace

TEST_CASE("shm: sizes 0, 1, 4 KiB, odd, 64 MiB, both directions at once") {
  auto p = make_shm_pair();
  CHECK(std::string(p->a->transport()) == "shm");
  for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{4096}, std::size_t{12345},
                            std::size_t{64} << 20}) {
    INFO("bytes=", bytes);
    exchange(*p->a, *p->b, bytes, static_cast<unsigned>(bytes % 97), kWait);
  }
  const std::uint64_t total = 1 + 4096 + 12345 + (std::uint64_t{64} << 20);
  CHECK(p->a->bytes_sent() == total);
  CHECK(p->b->bytes_received() == total);

  // A large odd-sized message into a misaligned buffer (the streaming copy's edges).
  const std::size_t odd = (std::size_t{9} << 20) + 7;
  const auto out = pattern(odd, 11);
  std::vector<unsigned char> in(odd + 3, 0);
  RequestPtr r = p->b->recv(in.data() + 3, odd);
  p->a->send(out.data() + 1, odd - 1)->wait(core::Deadline::after(kWait));
  r->wait(core::Deadline::after(kWait));
  CHECK(r->bytes() == odd - 1);
  CHECK(std::memcmp(in.data() + 3, out.data() + 1, odd - 1) == 0);
  CHECK(in[0] == 0);
  CHECK(in[odd + 2] == 0);
}

TEST_CASE("shm: small receives move on the waiting thread, or on the progress thread when not") {
  auto p = make_shm_pair();
  const auto one = pattern(100, 1), two = pattern(200, 2), three = pattern(300, 3);
  std::vector<unsigned char> in1(100), in2(200), in3(300);
  // Nobody waits for the first: its continuation must still run (the progress thread moves it).
  std::atomic<bool> continued{false};
  RequestPtr r1 = p->b->recv(in1.data(), in1.size());
  r1->then([&] { continued = true; });
  // The third is waited for before the second: it is not next in line, so the progress thread
  // takes the queue and both complete, in order.
  RequestPtr r2 = p->b->recv(in2.data(), in2.size());
  RequestPtr r3 = p->b->recv(in3.data(), in3.size());
  for (const auto* out : {&one, &two, &three}) {
    p->a->send(out->data(), out->size())->wait(core::Deadline::after(kWait));
  }
  r3->wait(core::Deadline::after(kWait));
  CHECK(r2->done());
  for (int i = 0; i < 500 && !continued; ++i) std::this_thread::sleep_for(2ms);
  CHECK(continued);
  CHECK(in1 == one);
  CHECK(in2 == two);
  CHECK(in3 == three);
  // Waited for while next in line, posted before its message: the waiter reads it itself.
  RequestPtr r4 = p->b->recv(in1.data(), in1.size());
  std::thread sender([&] {
    std::this_thread::sleep_for(20ms);
    p->a->send(two.data(), 100)->wait(core::Deadline::after(kWait));
  });
  r4->wait(core::Deadline::after(kWait));
  sender.join();
  CHECK(std::equal(in1.begin(), in1.end(), two.begin()));
  // A waiter whose deadline passes leaves the receive to the progress thread, intact.
  RequestPtr r5 = p->b->recv(in1.data(), in1.size());
  CHECK_THROWS_AS(r5->wait(core::Deadline::after(50ms)), core::TimeoutError);
  p->a->send(one.data(), one.size())->wait(core::Deadline::after(kWait));
  r5->wait(core::Deadline::after(kWait));
  CHECK(in1 == one);
}

TEST_CASE(
    "shm: awaited receives (a step's only slice) arrive intact, within the ring and past it") {
  // 2 MiB in the 4 MiB ring: posted before its message and after it, the waiter reads it whole.
  auto p = make_shm_pair();
  const auto big = pattern(2 << 20, 4);
  std::vector<unsigned char> in(big.size());
  RequestPtr early = p->b->recv_awaited(in.data(), in.size());
  std::thread sender([&] {
    std::this_thread::sleep_for(20ms);
    p->a->send(big.data(), big.size())->wait(core::Deadline::after(kWait));
  });
  early->wait(core::Deadline::after(kWait));
  sender.join();
  CHECK(early->bytes() == big.size());
  CHECK(in == big);
  std::fill(in.begin(), in.end(), 0);
  p->a->send(big.data(), big.size())->wait(core::Deadline::after(kWait));
  p->b->recv_awaited(in.data(), in.size())->wait(core::Deadline::after(kWait));
  CHECK(in == big);
  // Larger than a 4 KiB ring, it could never lie there whole: the progress thread streams it.
  auto tiny = make_small_ring_pair("awaited");
  std::vector<unsigned char> streamed(100003);
  RequestPtr late = tiny->b->recv_awaited(streamed.data(), streamed.size());
  RequestPtr sent = tiny->a->send(big.data(), streamed.size());
  late->wait(core::Deadline::after(kWait));
  sent->wait(core::Deadline::after(kWait));
  CHECK(std::equal(streamed.begin(), streamed.end(), big.begin()));
}

TEST_CASE("shm: no segment is left in /dev/shm once connected, nor after a failed connect") {
  auto p = make_shm_pair();
  CHECK(testing::shm_objects_of_this_process("ringlet-shm-") == 0);
  exchange(*p->a, *p->b, 100, 3, kWait);
  // A lower rank whose peer never shows up: TimeoutError naming the peer, name unlinked.
  testing::MemoryStore store;
  try {
    transport::connect_shm(0, 5, store, "lonely", core::Deadline::after(200ms));
    FAIL("expected a TimeoutError");
  } catch (const core::TimeoutError& e) {
    CHECK(std::string(e.what()).find("peer rank 5") != std::string::npos);
  }
  CHECK(testing::shm_objects_of_this_process("ringlet-shm-") == 0);
}

TEST_CASE("shared objects: names carry the creator's pid; a sweep removes a dead one's only") {
  using transport::creator_pid;
  CHECK(transport::shared_object_name(transport::kRdmaEmuKind, 42, "7-mrs") ==
        "/ringlet-ibemu-42-7-mrs");
  CHECK(creator_pid("ringlet-shm-123-ab-0-1", transport::kShmSegmentKind) == 123);
  CHECK(creator_pid("ringlet-ibemu-9-1-mrs", transport::kRdmaEmuKind) == 9);
  CHECK(creator_pid("ringlet-ibemu-9-1-mrs", transport::kShmSegmentKind) == 0);  // another kind
  CHECK(creator_pid("ringlet-shm-x1-a", transport::kShmSegmentKind) == 0);
  CHECK(creator_pid("ringlet-shm-77", transport::kShmSegmentKind) == 0);  // no '-' after it
  CHECK(creator_pid("ringlet-shm-1234567890-a", transport::kShmSegmentKind) == 0);  // 10 digits

  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) ::_exit(0);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);  // reaped: its pid names no process
  CHECK(transport::process_gone(child));
  CHECK_FALSE(transport::process_gone(::getpid()));
  testing::TempDir dir{"ringlet_shared_objects"};
  const std::string dead = std::to_string(child), live = std::to_string(::getpid());
  for (const std::string& name : {"ringlet-shm-" + dead + "-a", "ringlet-shm-" + live + "-b",
                                  "ringlet-ibemu-" + dead + "-c", "other-" + dead + "-d"}) {
    std::ofstream(dir.path / name) << "x";
  }
  const auto gone = [](pid_t pid, const std::filesystem::path&) {
    return transport::process_gone(pid);
  };
  CHECK(transport::sweep_shared_objects(transport::kShmSegmentKind, gone, dir.path) == 1);
  CHECK_FALSE(std::filesystem::exists(dir.path / ("ringlet-shm-" + dead + "-a")));
  CHECK(std::filesystem::exists(dir.path / ("ringlet-shm-" + live + "-b")));
  CHECK(std::filesystem::exists(dir.path / ("ringlet-ibemu-" + dead + "-c")));  // another kind
  CHECK(std::filesystem::exists(dir.path / ("other-" + dead + "-d")));
}

TEST_CASE(
    "shm: a segment whose creator died before its peer attached is removed at the next start") {
  const auto of_pid = [](pid_t pid) {
    int n = 0;
    const std::string prefix = "ringlet-shm-" + std::to_string(pid) + "-";
    for (const auto& entry : std::filesystem::directory_iterator("/dev/shm"))
      n += entry.path().filename().string().rfind(prefix, 0) == 0;
    return n;
  };
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {  // made, never attached, and the maker is gone without cleaning up
    auto left = transport::ShmSegment::create(0, 1);
    ::raise(SIGKILL);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(of_pid(child) == 1);
  // A live process's unattached segment is not stale.
  auto mine = transport::ShmSegment::create(0, 1);
  CHECK(transport::ShmSegment::remove_stale() >= 1);
  CHECK(of_pid(child) == 0);
  CHECK(of_pid(::getpid()) == 1);
}

TEST_CASE("shm: 200 messages posted before their receives, both directions") {
  auto p = make_shm_pair();
  constexpr int kCount = 200;
  // Sizes up to 64 KiB, about 6 MiB per direction in all: more than the 4 MiB ring, so the
  // senders must block on a full ring until the receives are posted.
  std::vector<std::vector<unsigned char>> out_a, out_b, in_a(kCount), in_b(kCount);
  std::vector<RequestPtr> requests;
  for (int i = 0; i < kCount; ++i) {
    const std::size_t bytes = (static_cast<std::size_t>(i) * 7919) % 65536;
    out_a.push_back(pattern(bytes, i));
    out_b.push_back(pattern(bytes + 3, i + 1000));
  }
  for (int i = 0; i < kCount; ++i) {
    requests.push_back(p->a->send(out_a[i].data(), out_a[i].size()));
    requests.push_back(p->b->send(out_b[i].data(), out_b[i].size()));
  }
  for (int i = 0; i < kCount; ++i) {
    in_a[i].resize(out_b[i].size());
    in_b[i].resize(out_a[i].size() + 10);  // a larger buffer: bytes() says the real length
    requests.push_back(p->a->recv(in_a[i].data(), in_a[i].size()));
    requests.push_back(p->b->recv(in_b[i].data(), in_b[i].size()));
  }
  transport::wait_all(requests, core::Deadline::after(kWait));
  for (int i = 0; i < kCount; ++i) {
    CHECK(in_a[i] == out_b[i]);
    CHECK(testing::same_bytes(in_b[i].data(), out_a[i].data(), out_a[i].size()));
    CHECK(requests[2 * kCount + 2 * i + 1]->bytes() == out_a[i].size());
  }
}

TEST_CASE("shm: four ranks all-to-all (oversubscribed cores do not starve anyone)") {
  constexpr int kRanks = 4;
  constexpr std::size_t kBytes = 1 << 20;
  testing::MemoryStore store;
  const auto deadline = core::Deadline::after(kWait);
  std::vector<std::future<int>> ranks;
  for (int r = 0; r < kRanks; ++r) {
    ranks.push_back(std::async(std::launch::async, [&, r] {
      // Peers in ascending order: every rank meets its pairs in the same (lo, hi) order, so the
      // blocking rendezvous cannot deadlock.
      std::vector<std::unique_ptr<Connection>> conns(kRanks);
      for (int peer = 0; peer < kRanks; ++peer) {
        if (peer != r) conns[peer] = transport::connect_shm(r, peer, store, "a2a", deadline);
      }
      int wrong = 0;
      for (int round = 0; round < 5; ++round) {
        std::vector<std::vector<unsigned char>> out(kRanks), in(kRanks);
        std::vector<RequestPtr> requests;
        for (int peer = 0; peer < kRanks; ++peer) {
          if (peer == r) continue;
          out[peer] = pattern(kBytes, static_cast<unsigned>(r * 10 + peer + round));
          in[peer].resize(kBytes);
          requests.push_back(conns[peer]->recv(in[peer].data(), kBytes));
          requests.push_back(conns[peer]->send(out[peer].data(), kBytes));
        }
        transport::wait_all(requests, deadline);
        for (int peer = 0; peer < kRanks; ++peer) {
          if (peer != r &&
              in[peer] != pattern(kBytes, static_cast<unsigned>(peer * 10 + r + round)))
            ++wrong;
        }
      }
      return wrong;
    }));
  }
  for (auto& rank : ranks) CHECK(rank.get() == 0);
}

TEST_CASE("shm: a message longer than the posted buffer is a PeerError that breaks the pair") {
  auto p = make_shm_pair();
  const auto out = pattern(100, 1);
  std::vector<unsigned char> in(50);
  RequestPtr s = p->a->send(out.data(), out.size());
  RequestPtr r = p->b->recv(in.data(), in.size());
  s->wait(core::Deadline::after(kWait));
  const std::string what = expect_peer_error(r, 5s);
  CHECK(what.find("100 bytes") != std::string::npos);
  CHECK(what.find("peer rank 0") != std::string::npos);
  // Later requests on both ends fail too: b's at once, a's once it sees b's end closed.
  expect_peer_error(p->b->send(out.data(), 1), 5s);
  std::vector<unsigned char> sink(10);
  expect_peer_error(p->a->recv(sink.data(), sink.size()), 5s);
}

TEST_CASE("shm: a destroyed peer fails pending and later requests; sent data still arrives") {
  auto p = make_shm_pair();
  const auto small = pattern(1000, 5);
  p->a->send(small.data(), small.size())->wait(core::Deadline::after(kWait));
  // b's pending send blocks on a full ring (a never receives it).
  const auto big = pattern(std::size_t{16} << 20, 6);
  RequestPtr blocked_send = p->b->send(big.data(), big.size());
  std::this_thread::sleep_for(50ms);
  p->a.reset();

  std::vector<unsigned char> in(1000);
  RequestPtr delivered = p->b->recv(in.data(), in.size());
  delivered->wait(core::Deadline::after(5s));  // written before the close: still delivered
  CHECK(in == small);
  RequestPtr pending = p->b->recv(in.data(), in.size());
  const std::string what = expect_peer_error(pending, 5s);
  CHECK(what.find("peer rank 0") != std::string::npos);
  CHECK(what.find("shm") != std::string::npos);
  CHECK(what.find("closed") != std::string::npos);
  expect_peer_error(blocked_send, 5s);
  CHECK(blocked_send->bytes() > 0);
  expect_peer_error(p->b->send(small.data(), small.size()), 5s);
}

TEST_CASE("shm: a silent peer turns into a TimeoutError naming it; abort fails the rest") {
  auto p = make_shm_pair();
  std::vector<unsigned char> in(64);
  RequestPtr r = p->b->recv(in.data(), in.size());
  try {
    r->wait(core::Deadline::after(200ms));
    FAIL("expected a TimeoutError");
  } catch (const core::TimeoutError& e) {
    CHECK(std::string(e.what()).find("recv of up to 64 bytes from rank") != std::string::npos);
    CHECK(std::string(e.what()).find("(shm): timed out after moving 0 bytes") != std::string::npos);
  }
  p->b->abort("test gave up");
  const std::string what = expect_peer_error(r, 5s);
  CHECK(what.find("test gave up") != std::string::npos);
  // The peer sees the abort as a closed connection.
  expect_peer_error(p->a->recv(in.data(), in.size()), 5s);
}

TEST_CASE("shm: tiny ring (RINGLET_SHM_RING_BYTES=4096) wraps correctly; bad values refused") {
  auto p = make_small_ring_pair("tiny");
  for (std::size_t bytes : {std::size_t{4095}, std::size_t{4097}, std::size_t{100003}}) {
    exchange(*p->a, *p->b, bytes, 9, kWait);
  }
  setenv("RINGLET_SHM_RING_BYTES", "5000", 1);
  CHECK_THROWS_AS(transport::ShmSegment::create(0, 1), core::ValueError);
  unsetenv("RINGLET_SHM_RING_BYTES");
}

TEST_CASE("shm: a segment opened by the wrong rank is refused") {
  transport::ShmSegment segment = transport::ShmSegment::create(0, 1);
  CHECK_THROWS_AS(transport::ShmSegment::open(segment.name(), 2, 0), core::HandshakeError);
  CHECK_THROWS_AS(transport::ShmSegment::open("/ringlet-shm-no-such-segment", 1, 0), core::Error);
}

TEST_CASE("shm: host buffers only; host identity is stable") {
  auto p = make_shm_pair();
  std::vector<unsigned char> buf(16);
  CHECK_THROWS_AS(p->a->send(transport::ConstBuffer{buf.data(), buf.size(), core::Device::cuda(0)}),
                  core::DeviceError);
  CHECK(transport::host_identity() == transport::host_identity());
  CHECK(transport::host_identity().find('/') != std::string::npos);
}

TEST_CASE("host identity: hostname, boot id and network namespace; RINGLET_HOSTID overrides") {
  ::unsetenv("RINGLET_HOSTID");
  char net[128] = {};
  REQUIRE(::readlink("/proc/self/ns/net", net, sizeof net - 1) > 0);
  const std::string identity = transport::host_identity();
  CHECK(identity.size() > std::strlen(net));
  CHECK(identity.substr(identity.size() - std::strlen(net)) == net);  // "net:[4026531840]"
  ::setenv("RINGLET_HOSTID", "rack3-node7", 1);
  CHECK(transport::host_identity() == "rack3-node7");
  ::setenv("RINGLET_HOSTID", "two words", 1);
  CHECK_THROWS_WITH_AS(transport::host_identity(), doctest::Contains("RINGLET_HOSTID='two words'"),
                       core::ValueError);
  ::unsetenv("RINGLET_HOSTID");
}

namespace {

// The child process of the fork test: rank 1. Returns its exit status (0 = all good).
int child_rank(const std::string& name) {
  try {
    transport::ShmConnection conn(transport::ShmSegment::open(name, 1, 0), 1, 0,
                                  core::Deadline::after(10s));
    std::vector<unsigned char> in(1 << 20);
    conn.recv(in.data(), in.size())->wait(core::Deadline::after(kWait));
    if (in != pattern(1 << 20, 1)) return 2;
    const auto reply = pattern(12345, 2);
    conn.send(reply.data(), reply.size())->wait(core::Deadline::after(kWait));
    // A large message that fills the ring and stays mid-transfer (the parent does not receive
    // it yet); nothing is received either, so the parent's large send blocks too.
    const auto big = pattern(std::size_t{64} << 20, 3);
    conn.send(big.data(), big.size());
    std::this_thread::sleep_for(30s);  // killed long before this
    return 4;
  } catch (...) {
    return 3;
  }
}

}  // namespace

TEST_CASE("shm between processes: exchange both ways, then SIGKILL mid-transfer") {
  transport::ShmSegment segment = transport::ShmSegment::create(0, 1);
  const std::string name = segment.name();
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) _exit(child_rank(name));  // the child never returns into the test runner

  transport::ShmConnection conn(std::move(segment), 0, 1, core::Deadline::after(10s));
  CHECK(testing::shm_objects_of_this_process("ringlet-shm-") == 0);
  const auto hello = pattern(1 << 20, 1);
  conn.send(hello.data(), hello.size())->wait(core::Deadline::after(kWait));
  std::vector<unsigned char> reply(20000);
  RequestPtr r = conn.recv(reply.data(), reply.size());
  r->wait(core::Deadline::after(kWait));
  REQUIRE(r->bytes() == 12345);
  reply.resize(12345);
  CHECK(reply == pattern(12345, 2));

  const auto big = pattern(std::size_t{64} << 20, 4);
  RequestPtr send = conn.send(big.data(), big.size());
  const auto settle = core::Deadline::after(5s);
  while (send->bytes() == 0 && !settle.expired()) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(100ms);  // the child's 64 MiB send has filled its ring by now
  REQUIRE(kill(child, SIGKILL) == 0);
  // Not reaped yet: the child is a zombie, which must still count as dead.
  std::vector<unsigned char> sink(std::size_t{64} << 20);
  RequestPtr recv = conn.recv(sink.data(), sink.size());
  const auto start = std::chrono::steady_clock::now();
  const std::string what = expect_peer_error(send, 5s);
  expect_peer_error(recv, 5s);
  CHECK(std::chrono::steady_clock::now() - start < 3s);
  CHECK(what.find("peer rank 1") != std::string::npos);
  CHECK(what.find("shm") != std::string::npos);
  CHECK(what.find("exited") != std::string::npos);
  CHECK(send->bytes() > 0);
  CHECK(send->bytes() < big.size());

  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  CHECK(testing::shm_objects_of_this_process("ringlet-shm-") == 0);
}

TEST_CASE("shm: cross-memory reads of the peer's memory, agreed at connect time") {
  auto p = make_shm_pair("cma");
  REQUIRE(p->a->can_read_peer());
  CHECK(p->b->can_read_peer());
  CHECK(p->a->bytes_received() == 0);  // the connect-time probe is not counted
  // The peer is this process here, so its memory is ours: read a buffer back through it.
  const auto source = pattern((std::size_t{3} << 20) + 5, 5);
  std::vector<unsigned char> copy(source.size());
  p->a->read_peer(copy.data(), reinterpret_cast<std::uintptr_t>(source.data()), source.size());
  CHECK(copy == source);
  CHECK(p->a->bytes_received() == source.size());
  // A range the peer does not map is a PeerError naming the peer, not a crash.
  try {
    p->b->read_peer(copy.data(), 64, 64);
    FAIL("reading the peer's page zero succeeded");
  } catch (const transport::PeerError& e) {
    const std::string what = e.what();
    CHECK(what.find("peer rank 0") != std::string::npos);
    CHECK(what.find("Bad address") != std::string::npos);
  }
}

TEST_CASE("shm: RINGLET_SHM_CMA=0 turns cross-memory reads off on both sides") {
  REQUIRE(::setenv("RINGLET_SHM_CMA", "0", 1) == 0);
  auto p = make_shm_pair("no-cma");
  ::unsetenv("RINGLET_SHM_CMA");
  CHECK_FALSE(p->a->can_read_peer());
  CHECK_FALSE(p->b->can_read_peer());
  std::vector<unsigned char> copy(16);
  CHECK_THROWS_WITH_AS(
      p->a->read_peer(copy.data(), reinterpret_cast<std::uintptr_t>(copy.data()), copy.size()),
      doctest::Contains("no cross-memory attach"), core::Error);
  exchange(*p->a, *p->b, 4096, 3, kWait);  // messages still flow
}

TEST_CASE("shm: RINGLET_SHM_GO_BACK=1 or 0 decides where each side's sends go; others refused") {
  for (const bool on : {true, false}) {
    REQUIRE(::setenv("RINGLET_SHM_GO_BACK", on ? "1" : "0", 1) == 0);
    auto p = make_shm_pair(on ? "go-back" : "no-go-back");
    ::unsetenv("RINGLET_SHM_GO_BACK");
    CHECK(dynamic_cast<transport::ShmConnection&>(*p->a).goes_back() == on);
    CHECK(dynamic_cast<transport::ShmConnection&>(*p->b).goes_back() == on);
    for (unsigned k = 0; k < 48; ++k) exchange(*p->a, *p->b, 200 * 1024, k, kWait);  // 2 passes
  }
  REQUIRE(::setenv("RINGLET_SHM_GO_BACK", "sometimes", 1) == 0);
  CHECK_THROWS_WITH_AS(make_shm_pair("go-back-bad"),
                       doctest::Contains("RINGLET_SHM_GO_BACK=sometimes is not auto, 1 or 0"),
                       core::ValueError);
  ::unsetenv("RINGLET_SHM_GO_BACK");
}

TEST_CASE("line_round_trip_ns: two threads bounce a line; a side alone stops within its wait") {
  // A connection's sides wait 2 ms for an answer; on a loaded machine (a sanitizer, tests beside
  // this one) a thread can wait longer than that for a CPU, so the pair here waits up to 200 ms.
  constexpr std::chrono::milliseconds kPatient{200};
  std::atomic<std::uint64_t> line{0};
  std::thread echo([&] { CHECK(std::isnan(transport::line_round_trip_ns(line, 1, kPatient))); });
  const double ns = transport::line_round_trip_ns(line, 0, kPatient);
  echo.join();
  CHECK(ns > 1);
  CHECK(ns < 2e8);  // within the answer wait
  for (const int side : {0, 1}) {
    std::atomic<std::uint64_t> alone{0};
    const auto start = std::chrono::steady_clock::now();
    CHECK(std::isnan(transport::line_round_trip_ns(alone, side)));
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));
  }
}

TEST_CASE("a shared window: a forked peer maps it by its address, both see each other's writes") {
  constexpr std::size_t kBytes = 1 << 20;
  transport::SharedWindow window = transport::SharedWindow::create(kBytes);
  const std::vector<unsigned char> mine = pattern(kBytes / 2, 3);
  std::memcpy(window.data(), mine.data(), mine.size());
  const std::string address = window.address();
  const pid_t child = fork();
  if (child == 0) {
    int status = 1;
    try {
      transport::SharedWindow peer = transport::SharedWindow::open(address);
      const std::vector<unsigned char> reply = pattern(kBytes / 2, 4);
      if (peer.bytes() == kBytes &&
          std::memcmp(peer.data(), pattern(kBytes / 2, 3).data(), kBytes / 2) == 0) {
        std::memcpy(peer.data() + kBytes / 2, reply.data(), reply.size());
        status = 0;
      }
    } catch (...) {
      status = 2;
    }
    _exit(status);
  }
  int status = -1;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  const std::vector<unsigned char> reply = pattern(kBytes / 2, 4);
  CHECK(std::memcmp(window.data() + kBytes / 2, reply.data(), reply.size()) == 0);

  // Once the handle is closed, or for an address that names nothing, open says what failed.
  window.close_handle();
  CHECK_THROWS_WITH_AS(transport::SharedWindow::open(address), doctest::Contains(address.c_str()),
                       core::Error);
  CHECK_THROWS_WITH_AS(transport::SharedWindow::open("12/x/3"),
                       doctest::Contains("bad address '12/x/3'"), core::ValueError);
  CHECK(window.data()[0] == static_cast<std::byte>(mine[0]));  // still mapped here
}
