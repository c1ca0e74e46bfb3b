// rdma transport: the emulated verbs provider against the verbs rules the transport relies on
// (QP states, writes with immediate, receives, error completions and flushes, injected faults),
// then RdmaConnection over it with ranks as threads and as processes: sizes 0 .. 64 MiB,
// credits under a slow reader, zero copy from a registered buffer, oversize messages, abort, a
// peer QP in error, a killed peer. Last, the libibverbs provider on real hardware, which skips
// visibly when there is none.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "connection_checks.h"
#include "emulated_rdma.h"
#include "memory_store.h"
#include "mesh_ranks.h"
#include "ringlet_command.h"
#include "transport/errors.h"
#include "transport/rdma/connection.h"
#include "transport/rdma/device.h"
#include "transport/rdma/verbs.h"
#include "transport/tcp_store.h"

using namespace ringlet;
using namespace ringlet::transport::rdma;
using namespace std::chrono_literals;
using testing::contains;
using testing::expect_peer_error;
using testing::pattern;
using transport::Connection;
using transport::RequestPtr;

namespace {

const auto kWait = 20s;

// Two emulated QPs of two contexts (as two processes would have), connected to each other.
struct VerbsPair {
  std::unique_ptr<Context> ca = emulated_provider().open("emu0", 1);
  std::unique_ptr<Context> cb = emulated_provider().open("emu0", 1);
  std::unique_ptr<CompletionQueue> qa = ca->create_cq(64);
  std::unique_ptr<CompletionQueue> qb = cb->create_cq(64);
  std::unique_ptr<QueuePair> a = ca->create_qp(*qa, *qa, QpCaps{});
  std::unique_ptr<QueuePair> b = cb->create_qp(*qb, *qb, QpCaps{});
  void* memory = cb->allocate(8192);  // b's memory a writes into
  std::unique_ptr<MemoryRegion> target = cb->register_memory(memory, 4096, true);
  std::vector<unsigned char> source = pattern(4096, 3);
  std::unique_ptr<MemoryRegion> local = ca->register_memory(source.data(), source.size(), false);

  void connect() {
    a->to_init();
    b->to_init();
    a->to_rtr(QpEndpoint{b->qp_num(), 0, 0, cb->gid(0), 4096});
    b->to_rtr(QpEndpoint{a->qp_num(), 0, 0, ca->gid(0), 4096});
    a->to_rts(0);
    b->to_rts(0);
  }
  WriteRequest write(std::size_t bytes, std::uint32_t imm, std::uint64_t offset = 0) const {
    WriteRequest w;
    w.wr_id = 77;
    w.local = source.data();
    w.bytes = bytes;
    w.lkey = local->lkey();
    w.remote_addr = reinterpret_cast<std::uint64_t>(memory) + offset;
    w.rkey = target->rkey();
    w.with_imm = true;
    w.imm = imm;
    return w;
  }
};

std::vector<WorkCompletion> poll_all(CompletionQueue& cq, std::size_t want,
                                     std::chrono::milliseconds within = 5000ms) {
  std::vector<WorkCompletion> got;
  const auto until = std::chrono::steady_clock::now() + within;
  while (got.size() < want && std::chrono::steady_clock::now() < until) {
    WorkCompletion c[8];
    const int n = cq.poll(c, 8);
    got.insert(got.end(), c, c + n);
    if (n == 0) cq.wait(1000us);
  }
  return got;
}

// Two RdmaConnections (ranks 0 and 1 as threads) over the emulated device.
struct RdmaPair {
  testing::EmulatedRdma env;
  testing::MemoryStore store;
  std::unique_ptr<RdmaDevice> da = open_rdma_device();
  std::unique_ptr<RdmaDevice> db = open_rdma_device();
  std::unique_ptr<Connection> a;
  std::unique_ptr<Connection> b;

  explicit RdmaPair(const std::string& prefix = "t") {
    const auto deadline = core::Deadline::after(10s);
    auto first = std::async(std::launch::async,
                            [&] { return connect_rdma(*da, 0, 1, store, prefix, deadline); });
    b = connect_rdma(*db, 1, 0, store, prefix, deadline);
    a = first.get();
  }
  ~RdmaPair() {
    a.reset();
    b.reset();
  }
};

// A libibverbs device with an active port that this process may open.
bool has_rdma_hardware() {
  try {
    return !hardware_rdma_device().empty() && open_rdma_device() != nullptr;
  } catch (const core::Error&) {
    return false;
  }
}

}  // namespace

TEST_CASE("emulated verbs: QP states go RESET, INIT, RTR, RTS and refuse skipping one") {
  VerbsPair p;
  CHECK(p.a->state() == QpState::reset);
  CHECK_THROWS_WITH_AS(p.a->to_rts(0), doctest::Contains("from RESET (needs RTR)"), core::Error);
  CHECK_THROWS_WITH_AS(p.a->post_write(p.write(8, 1)), doctest::Contains("in RESET (needs RTS)"),
                       core::Error);
  p.connect();
  CHECK(p.a->state() == QpState::rts);
  CHECK(p.b->state() == QpState::rts);
  CHECK_THROWS_AS(p.a->to_init(), core::Error);
  CHECK_THROWS_WITH_AS(p.ca->gid(1), doctest::Contains("one GID (index 0)"), core::ValueError);
}

TEST_CASE("emulated verbs: a write with immediate lands and completes on both sides") {
  VerbsPair p;
  p.connect();
  p.b->post_recv(5);
  p.b->post_recv(6);
  p.a->post_write(p.write(1000, 0xabcd, 100));
  const auto sent = poll_all(*p.qa, 1);
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].status == WcStatus::success);
  CHECK(sent[0].opcode == WcOpcode::rdma_write);
  CHECK(sent[0].wr_id == 77);
  const auto got = poll_all(*p.qb, 1);
  REQUIRE(got.size() == 1);
  CHECK(got[0].status == WcStatus::success);
  CHECK(got[0].opcode == WcOpcode::recv_rdma_with_imm);
  CHECK(got[0].wr_id == 5);  // receives are taken in posting order
  CHECK(got[0].imm == 0xabcd);
  CHECK(got[0].byte_len == 1000);
  CHECK(std::memcmp(static_cast<char*>(p.memory) + 100, p.source.data(), 1000) == 0);
  // A write without immediate takes no receive and completes only on the writer's side.
  WriteRequest plain = p.write(10, 0);
  plain.with_imm = false;
  p.a->post_write(plain);
  CHECK(poll_all(*p.qa, 1).size() == 1);
  CHECK(poll_all(*p.qb, 1, 100ms).empty());
}

TEST_CASE("emulated verbs: access errors fail the request, move the QP to error and flush") {
  VerbsPair p;
  p.connect();
  p.b->post_recv(1);
  SUBCASE("outside the region") { p.a->post_write(p.write(200, 0, 4000)); }
  SUBCASE("a wrong rkey") {
    WriteRequest w = p.write(10, 0);
    w.rkey ^= 0x10000;
    p.a->post_write(w);
  }
  const auto failed = poll_all(*p.qa, 1);
  REQUIRE(failed.size() == 1);
  CHECK(failed[0].status == WcStatus::remote_access);
  CHECK(p.a->state() == QpState::error);
  p.a->post_write(p.write(8, 0));  // after the error: flushed, not run
  const auto flushed = poll_all(*p.qa, 1);
  REQUIRE(flushed.size() == 1);
  CHECK(flushed[0].status == WcStatus::flushed);
  // The local buffer outside its lkey's region.
  VerbsPair q;
  q.connect();
  WriteRequest w = q.write(8, 0);
  w.local = q.source.data() + 4090;
  q.a->post_write(w);
  const auto local = poll_all(*q.qa, 1);
  REQUIRE(local.size() == 1);
  CHECK(local[0].status == WcStatus::local_protection);
}

TEST_CASE("emulated verbs: to_error flushes posted receives; the peer's writes then fail") {
  VerbsPair p;
  p.connect();
  p.b->post_recv(11);
  p.b->post_recv(12);
  p.b->to_error();
  const auto flushed = poll_all(*p.qb, 2);
  REQUIRE(flushed.size() == 2);
  CHECK(flushed[0].wr_id == 11);
  CHECK(flushed[1].wr_id == 12);
  CHECK(flushed[0].status == WcStatus::flushed);
  p.a->post_write(p.write(8, 1));
  const auto failed = poll_all(*p.qa, 1);
  REQUIRE(failed.size() == 1);
  CHECK(failed[0].status == WcStatus::retry_exceeded);
  CHECK(contains(failed[0].detail, "is in ERROR"));
}

TEST_CASE("emulated verbs: no receive posted is RNR retries exceeded; a gone peer is retries") {
  VerbsPair p;
  p.connect();
  const auto started = std::chrono::steady_clock::now();
  p.a->post_write(p.write(8, 1));
  const auto failed = poll_all(*p.qa, 1);
  REQUIRE(failed.size() == 1);
  CHECK(failed[0].status == WcStatus::rnr_exceeded);
  CHECK(std::chrono::steady_clock::now() - started < 5s);

  VerbsPair q;
  q.connect();
  q.b.reset();  // the peer's QP is destroyed (as when its process dies)
  q.a->post_write(q.write(8, 1));
  const auto gone = poll_all(*q.qa, 1);
  REQUIRE(gone.size() == 1);
  CHECK(gone[0].status == WcStatus::retry_exceeded);
}

TEST_CASE("emulated verbs: RINGLET_IB_EMU_FAULT drops the peer or fails the QP after N writes") {
  ::setenv("RINGLET_IB_EMU_FAULT", "drop_after=2", 1);
  {
    VerbsPair p;
    p.connect();
    for (int i = 0; i < 3; ++i) p.b->post_recv(i);
    for (int i = 0; i < 3; ++i) p.a->post_write(p.write(8, i));
    const auto got = poll_all(*p.qa, 3);
    REQUIRE(got.size() == 3);
    CHECK(got[0].status == WcStatus::success);
    CHECK(got[1].status == WcStatus::success);
    CHECK(got[2].status == WcStatus::retry_exceeded);
    CHECK(contains(got[2].detail, "injected"));
  }
  ::setenv("RINGLET_IB_EMU_FAULT", "qp_error_after=0", 1);
  {
    VerbsPair p;
    p.connect();
    p.a->post_write(p.write(8, 0));
    const auto got = poll_all(*p.qa, 1);
    REQUIRE(got.size() == 1);
    CHECK(got[0].status == WcStatus::flushed);
    CHECK(p.a->state() == QpState::error);
  }
  ::setenv("RINGLET_IB_EMU_FAULT", "drop_after=x", 1);
  CHECK_THROWS_WITH_AS(emulated_provider().open("emu0", 1),
                       doctest::Contains("is not drop_after=N or qp_error_after=N"),
                       core::ValueError);
  ::unsetenv("RINGLET_IB_EMU_FAULT");
}

TEST_CASE("emulated verbs: only allocate()d memory takes remote writes; objects go with it") {
  const int before = testing::shm_objects_of_this_process("ringlet-ibemu-");
  {
    auto context = emulated_provider().open("emu0", 1);
    std::vector<char> plain(4096);
    CHECK_THROWS_WITH_AS(context->register_memory(plain.data(), plain.size(), true),
                         doctest::Contains("must lie in memory from Context::allocate"),
                         core::ValueError);
    CHECK(testing::shm_objects_of_this_process("ringlet-ibemu-") > before);
  }
  CHECK(testing::shm_objects_of_this_process("ringlet-ibemu-") == before);
}

TEST_CASE("rdma: sizes 0, 1, 4 KiB, odd, 64 MiB, both directions at once") {
  RdmaPair p;
  CHECK(std::string(p.a->transport()) == "rdma");
  for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{4096}, std::size_t{12345},
                            std::size_t{64} << 20}) {
    INFO("bytes=", bytes);
    testing::exchange(*p.a, *p.b, bytes, static_cast<unsigned>(bytes % 97), kWait);
  }
  const std::uint64_t total = 1 + 4096 + 12345 + (std::uint64_t{64} << 20);
  CHECK(p.a->bytes_sent() == total);
  CHECK(p.b->bytes_received() == total);
}

TEST_CASE("rdma: many messages in flight keep their order; a slow reader is never overrun") {
  RdmaPair p;
  // More than the slots' worth, sent before any receive is posted: the sender runs out of
  // credits and waits; nothing is lost when the reader comes.
  const int count = 64;
  std::vector<std::vector<unsigned char>> out;
  std::vector<RequestPtr> sends;
  for (int i = 0; i < count; ++i) {
    out.push_back(pattern(100000 + static_cast<std::size_t>(i) * 1000, static_cast<unsigned>(i)));
    sends.push_back(p.a->send(out.back().data(), out.back().size()));
  }
  std::this_thread::sleep_for(200ms);
  CHECK(!sends.back()->done());  // held back by credits
  for (int i = 0; i < count; ++i) {
    std::vector<unsigned char> in(out[i].size());
    RequestPtr r = p.b->recv(in.data(), in.size());
    r->wait(core::Deadline::after(kWait));
    CHECK(r->bytes() == out[i].size());
    CHECK(in == out[i]);
  }
  transport::wait_all(sends, core::Deadline::after(kWait));
}

TEST_CASE("rdma: with 4 slots of 4 KiB, messages of many fragments stall on credits mid-message") {
  ::setenv("RINGLET_IB_SLOTS", "4", 1);
  ::setenv("RINGLET_IB_SLOT_BYTES", "4096", 1);
  RdmaPair p;
  ::unsetenv("RINGLET_IB_SLOTS");
  ::unsetenv("RINGLET_IB_SLOT_BYTES");
  CHECK(p.a->preferred_slice_bytes() == 4096);
  std::vector<std::vector<unsigned char>> out;
  std::vector<RequestPtr> sends;
  for (int i = 0; i < 10; ++i) {  // 13 fragments each, all sent before the reader comes
    out.push_back(pattern(50000 + static_cast<std::size_t>(i), static_cast<unsigned>(i)));
    sends.push_back(p.a->send(out.back().data(), out.back().size()));
  }
  std::this_thread::sleep_for(100ms);
  CHECK(sends.front()->bytes() == 4 * 4096);  // four fragments written, then no credit
  CHECK(!sends.front()->done());
  for (int i = 0; i < 10; ++i) {
    std::vector<unsigned char> in(out[i].size());
    RequestPtr r = p.b->recv(in.data(), in.size());
    r->wait(core::Deadline::after(kWait));
    CHECK(in == out[i]);
  }
  transport::wait_all(sends, core::Deadline::after(kWait));
  CHECK(p.a->bytes_sent() == p.b->bytes_received());
}

TEST_CASE("rdma: a registered buffer is sent without a copy; others through bounce slots") {
  RdmaPair p;
  std::vector<unsigned char> big = pattern(3 << 20, 9);
  auto* connection = dynamic_cast<RdmaConnection*>(p.a.get());
  REQUIRE(connection != nullptr);
  std::vector<unsigned char> in(big.size());
  RequestPtr r = p.b->recv(in.data(), in.size());
  p.a->send(big.data(), big.size())->wait(core::Deadline::after(kWait));
  r->wait(core::Deadline::after(kWait));
  CHECK(connection->zero_copy_bytes() == 0);
  p.da->registrations->add(big.data(), big.size());
  std::fill(in.begin(), in.end(), 0);
  r = p.b->recv(in.data(), in.size());
  p.a->send(big.data() + 1, big.size() - 1)->wait(core::Deadline::after(kWait));
  r->wait(core::Deadline::after(kWait));
  CHECK(connection->zero_copy_bytes() == big.size() - 1);
  CHECK(std::memcmp(in.data(), big.data() + 1, big.size() - 1) == 0);
  CHECK_THROWS_WITH_AS(p.da->registrations->add(big.data() + 10, 10),
                       doctest::Contains("overlaps one already registered"), core::ValueError);
  p.da->registrations->remove(big.data());
}

TEST_CASE("rdma: a message longer than the posted receive is a PeerError") {
  RdmaPair p;
  const auto out = pattern(1000, 1);
  std::vector<unsigned char> in(999);
  RequestPtr r = p.b->recv(in.data(), in.size());
  p.a->send(out.data(), out.size());
  const std::string what = expect_peer_error(r, 10s);
  CHECK(contains(what, "rank 1: rdma connection with peer rank 0 failed"));
  CHECK(contains(what, "longer than the 999-byte receive"));
  // The sender's write had landed; the sender learns at its next wait (the QP is in error).
  std::vector<unsigned char> reply(10);
  CHECK(contains(expect_peer_error(p.a->recv(reply.data(), reply.size()), 5s),
                 "rank 0: rdma connection with peer rank 1 failed"));
}

TEST_CASE("rdma: abort, a peer QP in error and a closed peer fail what waits, naming both") {
  SUBCASE("abort") {
    RdmaPair p;
    std::vector<unsigned char> in(10);
    RequestPtr r = p.a->recv(in.data(), in.size());
    p.a->abort("test abort");
    CHECK(contains(expect_peer_error(r, 5s), "aborted: test abort"));
    // The peer learns at its next write or keepalive.
    std::vector<unsigned char> in_b(10);
    RequestPtr rb = p.b->recv(in_b.data(), in_b.size());
    CHECK(contains(expect_peer_error(rb, 5s), "rank 1: rdma connection with peer rank 0 failed"));
  }
  SUBCASE("the peer closed: a receive that waits fails within about a second") {
    RdmaPair p;
    std::vector<unsigned char> in(10);
    RequestPtr r = p.a->recv(in.data(), in.size());
    const auto started = std::chrono::steady_clock::now();
    p.b.reset();
    const std::string what = expect_peer_error(r, 10s);
    CHECK(std::chrono::steady_clock::now() - started < 3s);
    CHECK(contains(what, "rank 0: rdma connection with peer rank 1 failed"));
    CHECK(contains(what, "RETRY_EXC_ERR"));
  }
}

TEST_CASE(
    "rdma: what a peer sent before it closed still arrives, to receives posted before and "
    "after its connection failed; a receive for more fails") {
  RdmaPair p;
  // 2 + 2 + 1 fragments of the 512 KiB slots: within the credits, so each send completes as its
  // writes land, before any receive is posted.
  std::vector<std::vector<unsigned char>> out{pattern(600000, 1), pattern(1 << 20, 2),
                                              pattern(100, 3)};
  std::vector<RequestPtr> sends;
  for (const auto& message : out) sends.push_back(p.a->send(message.data(), message.size()));
  transport::wait_all(sends, core::Deadline::after(kWait));
  std::vector<unsigned char> first(out[0].size());
  RequestPtr before = p.b->recv(first.data(), first.size());
  p.a.reset();  // the sender is done and closes, as a rank that finished its last op does
  // Rank 1's next write finds the peer's QP gone: the connection fails...
  unsigned char byte = 7;
  CHECK(contains(expect_peer_error(p.b->send(&byte, 1), 5s), "RETRY_EXC_ERR"));
  // ...but what had arrived whole is still handed over, before and after the failure.
  before->wait(core::Deadline::after(kWait));
  CHECK(first == out[0]);
  for (std::size_t i = 1; i < out.size(); ++i) {
    std::vector<unsigned char> in(out[i].size());
    RequestPtr after = p.b->recv(in.data(), in.size());
    after->wait(core::Deadline::after(kWait));
    CHECK(after->bytes() == out[i].size());
    CHECK(in == out[i]);
  }
  std::vector<unsigned char> more(10);
  CHECK(contains(expect_peer_error(p.b->recv(more.data(), more.size()), 5s),
                 "rank 1: rdma connection with peer rank 0 failed"));
}

TEST_CASE("rdma: a QP moved to error mid-stream (RINGLET_IB_EMU_FAULT) fails both sides") {
  ::setenv("RINGLET_IB_EMU_FAULT", "qp_error_after=5", 1);
  RdmaPair p;
  ::unsetenv("RINGLET_IB_EMU_FAULT");
  const auto out = pattern(3 << 20, 4);  // 6 fragments: the sixth write meets the fault
  std::vector<unsigned char> in(out.size());
  RequestPtr r = p.b->recv(in.data(), in.size());
  RequestPtr s = p.a->send(out.data(), out.size());
  const std::string sender = expect_peer_error(s, 10s);
  INFO(sender);
  CHECK(contains(sender, "rank 0: rdma connection with peer rank 1 failed: a write failed"));
  CHECK(contains(sender, "WR_FLUSH_ERR"));
  const std::string receiver = expect_peer_error(r, 10s);
  CHECK(contains(receiver, "rank 1: rdma connection with peer rank 0 failed"));
}

TEST_CASE("rdma: a rank killed mid-transfer fails the survivor within seconds") {
  testing::EmulatedRdma env;
  testing::ForkedPeer peer = testing::fork_peer([](int port) {
    transport::TcpStore store("127.0.0.1", port, core::Deadline::after(10s));
    auto device = open_rdma_device();
    auto c = connect_rdma(*device, 1, 0, store, "kill", core::Deadline::after(10s));
    std::this_thread::sleep_for(30s);  // a reader that never comes: the sender waits on credits
    return 0;
  });
  transport::TcpStore store("127.0.0.1", peer.port, core::Deadline::after(10s));
  auto device = open_rdma_device();
  auto c = connect_rdma(*device, 0, 1, store, "kill", core::Deadline::after(10s));
  // 64 MiB to a peer that reads nothing: the slots fill, the sender waits for credits, and then
  // the peer is killed.
  std::vector<unsigned char> out(64 << 20, 1);
  RequestPtr s = c->send(out.data(), out.size());
  std::this_thread::sleep_for(300ms);
  CHECK(!s->done());
  ::kill(peer.pid, SIGKILL);
  ::waitpid(peer.pid, nullptr, 0);
  const auto started = std::chrono::steady_clock::now();
  const std::string what = expect_peer_error(s, 10s);
  CHECK(std::chrono::steady_clock::now() - started < 3s);
  CHECK(contains(what, "rank 0: rdma connection with peer rank 1 failed"));
  CHECK(contains(what, "is gone"));
}

TEST_CASE("rdma: settings and device choice are checked") {
  ::setenv("RINGLET_IB_DEVICE", "emu0:2", 1);
  CHECK_THROWS_WITH_AS(open_rdma_device(), doctest::Contains("one port (1), not 2"),
                       core::ValueError);
  ::setenv("RINGLET_IB_DEVICE", "emu0:x", 1);
  CHECK_THROWS_WITH_AS(open_rdma_device(), doctest::Contains("the port after ':' must be 1..255"),
                       core::ValueError);
  ::setenv("RINGLET_IB_DEVICE", "emu0", 1);
  ::setenv("RINGLET_IB_GID_INDEX", "3", 1);
  CHECK_THROWS_WITH_AS(open_rdma_device(), doctest::Contains("one GID (index 0), not 3"),
                       core::ValueError);
  ::unsetenv("RINGLET_IB_GID_INDEX");
  CHECK(open_rdma_device()->describe() ==
        "emu0 port 1 (emulated provider: ranks of one host only)");
  ::setenv("RINGLET_IB_DEVICE", "mlx5_9", 1);
  CHECK_THROWS_AS(open_rdma_device(), core::Error);
  ::unsetenv("RINGLET_IB_DEVICE");
  CHECK_THROWS_WITH_AS(decode_endpoint("1 2 3 zz 4096 5 6 8 524288", 4),
                       doctest::Contains("malformed endpoint record from rank 4"),
                       core::HandshakeError);
  const RdmaEndpoint e{QpEndpoint{7, 8, 9, Gid{1, 2, 3}, 1024}, 0x1000, 42, 8, 4096};
  const RdmaEndpoint back = decode_endpoint(encode_endpoint(e), 0);
  CHECK(back.qp.qp_num == 7);
  CHECK(back.qp.gid == e.qp.gid);
  CHECK(back.slots_addr == 0x1000);
  CHECK(back.slot_bytes == 4096);
}

TEST_CASE("rdma on hardware: two connections through the first libibverbs device" *
          doctest::skip(!has_rdma_hardware()) *
          doctest::description("needs an RDMA device (ibv_devices lists none here, or this build "
                               "has no libibverbs)")) {
  testing::MemoryStore store;
  auto da = open_rdma_device();
  auto db = open_rdma_device();
  const auto deadline = core::Deadline::after(10s);
  auto first = std::async(std::launch::async,
                          [&] { return connect_rdma(*da, 0, 1, store, "hw", deadline); });
  auto b = connect_rdma(*db, 1, 0, store, "hw", deadline);
  auto a = first.get();
  const auto out = pattern(8 << 20, 5);
  std::vector<unsigned char> in(out.size());
  RequestPtr r = b->recv(in.data(), in.size());
  a->send(out.data(), out.size())->wait(core::Deadline::after(kWait));
  r->wait(core::Deadline::after(kWait));
  CHECK(in == out);
}
