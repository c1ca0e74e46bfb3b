// tcp transport between two ranks as threads: sizes (0, 1, 4 KiB, odd, 64 MiB) over 1 and
// several sockets, both directions at once, many messages in flight, short messages into large
// buffers, receives read without their waiter (unwaited, resumed after a park, continuations),
// joined sends (one message, head then body; refused with nothing sent), and the handshake's
// refusals (stranger, wrong job, wrong rank, port in use).
#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "ipv6.h"
#include "raw_socket.h"
#include "same_bytes.h"
#include "tcp_pair.h"
#include "transport/errors.h"
#include "transport/tcp/interfaces.h"
#include "transport/tcp/unpaced.h"

using namespace ringlet;
using namespace ringlet::testing;
using transport::RequestPtr;

namespace {

using ringlet::testing::raw_connect;

const auto kWait = 20s;

std::string congestion_of(int fd) {
  char name[16] = {};
  socklen_t length = sizeof name - 1;
  REQUIRE(::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &length) == 0);
  return name;
}

// A listener's accepted socket and the dialling one of rank 1, through the handshake.
std::pair<int, int> handshaken_pair(transport::tcp::Listener& listener, core::Deadline deadline) {
  auto dial = std::async(std::launch::async, [&] {
    return transport::tcp::connect_socket("127.0.0.1", listener.port(), hello_from(1, 0, 0, 1),
                                          deadline);
  });
  const int accepted = listener.take(1, 0, deadline);
  return {accepted, dial.get()};
}

// Whether this process may give a socket bbr (the kernel has it and allows it here).
bool can_use_bbr() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  const bool ok = fd >= 0 && ::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, "bbr", 3) == 0;
  if (fd >= 0) ::close(fd);
  return ok;
}

}  // namespace

TEST_CASE("sizes over one and several sockets, both directions at once") {
  for (int nsocks : {1, 3}) {
    transport::tcp::TcpOptions options;
    options.stripe_min_bytes = 1024;  // stripe even mid-size messages
    TcpPair p = make_tcp_pair(nsocks, "127.0.0.1", options);
    for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{4096}, std::size_t{12345},
                              std::size_t{64} << 20}) {
      INFO("nsocks=", nsocks, " bytes=", bytes);
      exchange(*p.a, *p.b, bytes, static_cast<unsigned>(bytes % 97), kWait);
    }
    CHECK(p.a->bytes_sent() == p.b->bytes_received());
    CHECK(p.a->bytes_received() == p.b->bytes_sent());
  }
}

TEST_CASE("many messages in flight keep their order") {
  TcpPair p = make_tcp_pair(2);
  constexpr int kCount = 200;
  std::vector<std::vector<unsigned char>> out(kCount), in(kCount);
  std::vector<RequestPtr> sends, recvs;
  for (int i = 0; i < kCount; ++i) {
    out[i] = pattern(static_cast<std::size_t>(i * 37 % 5000), static_cast<unsigned>(i));
    sends.push_back(p.a->send(out[i].data(), out[i].size()));  // all posted before any recv
  }
  for (int i = 0; i < kCount; ++i) {
    in[i].assign(5000, 0);
    recvs.push_back(p.b->recv(in[i].data(), in[i].size()));
  }
  transport::wait_all(sends, core::Deadline::after(kWait));
  transport::wait_all(recvs, core::Deadline::after(kWait));
  for (int i = 0; i < kCount; ++i) {
    REQUIRE(recvs[i]->bytes() == out[i].size());
    REQUIRE(testing::same_bytes(in[i].data(), out[i].data(), out[i].size()));
  }
}

TEST_CASE("receives nobody waits for yet do not stall their senders") {
  // A receive is read by the thread that waits for it. Here both ranks wait for their sends
  // first, and the messages do not fit the socket buffers, so each send can only finish once the
  // peer reads: the sockets' threads must take over receives that nobody is reading.
  transport::tcp::TcpOptions options;
  options.socket_buffer_bytes = 64 * 1024;
  TcpPair p = make_tcp_pair(1, "127.0.0.1", options);
  const std::size_t bytes = 4 << 20;  // far more than the socket buffers hold
  const auto out_a = pattern(bytes, 3), out_b = pattern(bytes, 4);
  std::vector<unsigned char> in_a(bytes), in_b(bytes);
  RequestPtr ra = p.a->recv(in_a.data(), in_a.size());
  RequestPtr rb = p.b->recv(in_b.data(), in_b.size());
  RequestPtr sa = p.a->send(out_a.data(), out_a.size());
  RequestPtr sb = p.b->send(out_b.data(), out_b.size());
  const auto deadline = core::Deadline::after(kWait);
  sa->wait(deadline);  // each needs the peer to read most of it before anyone waits there
  sb->wait(deadline);
  transport::wait_all({ra, rb}, deadline);
  CHECK(in_a == out_b);
  CHECK(in_b == out_a);
}

TEST_CASE("a message whose header arrived before its receive still moves when nobody waits") {
  // The socket's thread reads message 0 for its continuation and goes on to message 1's header,
  // which has no receive yet: the socket parks. Posting that receive resumes the socket without
  // waking its thread (a waiter would read the message), but nobody waits for it here, while
  // its sender waits to get it all out, which needs the receiver to read: the socket's thread
  // must take it over.
  transport::tcp::TcpOptions options;
  options.socket_buffer_bytes = 64 * 1024;
  TcpPair p = make_tcp_pair(1, "127.0.0.1", options);
  const auto out0 = pattern(4096, 5), out1 = pattern(4 << 20, 6);
  std::vector<unsigned char> in0(out0.size()), in1(out1.size());
  std::atomic<bool> got0{false};
  RequestPtr r0 = p.b->recv(in0.data(), in0.size());
  r0->then([&] { got0 = true; });
  RequestPtr s0 = p.a->send(out0.data(), out0.size());
  RequestPtr s1 = p.a->send(out1.data(), out1.size());
  for (int i = 0; i < 400 && !got0; ++i) std::this_thread::sleep_for(5ms);
  REQUIRE(got0);
  std::this_thread::sleep_for(20ms);  // the thread reads on into message 1's header and parks
  RequestPtr r1 = p.b->recv(in1.data(), in1.size());
  const auto deadline = core::Deadline::after(kWait);
  s1->wait(deadline);  // b reads message 1 with nobody waiting for it
  r1->wait(deadline);
  CHECK(in0 == out0);
  CHECK(in1 == out1);
}

TEST_CASE("a receive completes for a continuation with nobody waiting") {
  TcpPair p = make_tcp_pair(2);
  const auto out = pattern(4096, 9);
  std::vector<unsigned char> in(out.size());
  std::mutex mutex;
  std::condition_variable cv;
  bool called = false;
  RequestPtr r = p.b->recv(in.data(), in.size());
  r->then([&] {
    std::lock_guard lock(mutex);
    called = true;
    cv.notify_all();
  });
  p.a->send(out.data(), out.size());
  std::unique_lock lock(mutex);
  REQUIRE(core::wait_until(cv, lock, core::Deadline::after(kWait), [&] { return called; }));
  CHECK(r->done());
  CHECK(in == out);
}

TEST_CASE("a joined send is one message, head then body, also when the socket takes it in parts") {
  transport::tcp::TcpOptions options;
  options.socket_buffer_bytes = 64 * 1024;  // the 4 MiB body goes out in many writes
  TcpPair p = make_tcp_pair(1, "127.0.0.1", options);
  const auto head = pattern(24, 1);
  for (std::size_t bytes : {std::size_t{0}, std::size_t{1000}, std::size_t{4} << 20}) {
    INFO("body bytes=", bytes);
    const auto body = pattern(bytes, 2);
    std::vector<unsigned char> in(head.size() + bytes + 100, 0);
    RequestPtr sent = p.a->try_send_joined({head.data(), head.size()}, {body.data(), body.size()});
    REQUIRE(sent != nullptr);
    RequestPtr got = p.b->recv(in.data(), in.size());
    const auto deadline = core::Deadline::after(kWait);
    got->wait(deadline);
    sent->wait(deadline);
    REQUIRE(got->bytes() == head.size() + bytes);
    CHECK(std::equal(head.begin(), head.end(), in.begin()));
    CHECK(std::equal(body.begin(), body.end(), in.begin() + 24));
    CHECK(sent->bytes() == head.size() + bytes);
  }
  CHECK(p.a->bytes_sent() == p.b->bytes_received());
}

TEST_CASE("a joined send is refused, nothing sent, for a head too long or a message to stripe") {
  transport::tcp::TcpOptions options;
  options.stripe_min_bytes = 1024;
  TcpPair p = make_tcp_pair(2, "127.0.0.1", options);
  const auto head = pattern(33, 3), body = pattern(2000, 4);
  CHECK(p.a->try_send_joined({head.data(), 33}, {body.data(), 10}) == nullptr);
  CHECK(p.a->try_send_joined({head.data(), 8}, {body.data(), 2000}) == nullptr);  // 2 stripes
  RequestPtr joined = p.a->try_send_joined({head.data(), 8}, {body.data(), 500});
  REQUIRE(joined != nullptr);
  // What was refused was not sent: the first message is the joined one, the next a plain send.
  RequestPtr plain = p.a->send(body.data(), body.size());
  std::vector<unsigned char> first(4000, 0), second(4000, 0);
  RequestPtr r1 = p.b->recv(first.data(), first.size());
  RequestPtr r2 = p.b->recv(second.data(), second.size());
  transport::wait_all({r1, r2, joined, plain}, core::Deadline::after(kWait));
  REQUIRE(r1->bytes() == 508);
  CHECK(std::equal(head.begin(), head.begin() + 8, first.begin()));
  CHECK(std::equal(body.begin(), body.begin() + 500, first.begin() + 8));
  REQUIRE(r2->bytes() == body.size());
  CHECK(std::equal(body.begin(), body.end(), second.begin()));
}

TEST_CASE("a message longer than the posted buffer is a PeerError, never an overrun") {
  TcpPair p = make_tcp_pair(1);
  const auto out = pattern(100, 1);
  std::vector<unsigned char> small(64 + 8, 0xee);
  RequestPtr r = p.b->recv(small.data(), 64);
  p.a->send(out.data(), out.size());
  CHECK_THROWS_WITH_AS(r->wait(core::Deadline::after(kWait)),
                       doctest::Contains("longer than the posted receive buffer"), core::PeerError);
  for (std::size_t i = 64; i < small.size(); ++i) REQUIRE(small[i] == 0xee);
  // later requests fail fast with the same cause
  CHECK_THROWS_AS(p.b->recv(small.data(), 64)->wait(core::Deadline::after(1s)), core::PeerError);
}

TEST_CASE("a peer that goes away fails pending and later requests") {
  TcpPair p = make_tcp_pair(2);
  std::vector<unsigned char> buf(1024);
  RequestPtr r = p.a->recv(buf.data(), buf.size());
  p.b.reset();  // rank 1 closes its sockets
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH_AS(r->wait(core::Deadline::after(kWait)),
                       doctest::Contains("rank 0: connection to peer rank 1 (tcp) failed"),
                       core::PeerError);
  CHECK(std::chrono::steady_clock::now() - start < 5s);
  CHECK_THROWS_AS(p.a->send(buf.data(), 10)->wait(core::Deadline::after(1s)), core::PeerError);
}

TEST_CASE("an orderly close delivers every frame sent before it; a later receive fails fast") {
  TcpPair p = make_tcp_pair(2);
  const auto big = pattern(3 << 20, 5), small = pattern(100, 6);
  auto s1 = p.b->send(big.data(), big.size());  // striped over both sockets
  auto s2 = p.b->send(small.data(), small.size());
  s1->wait(core::Deadline::after(kWait));
  s2->wait(core::Deadline::after(kWait));
  p.b.reset();  // closes in order (goodbye frames) before rank 0 posted any receive
  std::vector<unsigned char> in_big(big.size()), in_small(small.size());
  p.a->recv(in_big.data(), in_big.size())->wait(core::Deadline::after(kWait));
  p.a->recv(in_small.data(), in_small.size())->wait(core::Deadline::after(kWait));
  CHECK(in_big == big);
  CHECK(in_small == small);
  // Posted after both goodbyes arrived, or before the last one: either way it fails at once.
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH_AS(p.a->recv(in_small.data(), 1)->wait(core::Deadline::after(kWait)),
                       doctest::Contains("the peer closed the connection"), core::PeerError);
  CHECK(std::chrono::steady_clock::now() - start < 2s);
}

TEST_CASE("a socket that ends without a goodbye fails the connection while another is parked") {
  // A peer with two sockets dies after sending half of message 0 on socket 0 and the header
  // of message 1 there too (socket 0 parks: no receive is posted for message 1 yet), and
  // nothing on socket 1. Its end must fail the pending receive at once, not at the deadline.
  RawPeerConnection peer = make_raw_peer_connection(2, core::Deadline::after(kWait));
  transport::tcp::TcpConnection& conn = *peer.conn;
  const std::vector<int>& raw = peer.raw;
  std::vector<unsigned char> buf(1024);
  RequestPtr r = conn.recv(buf.data(), buf.size());
  const std::vector<unsigned char> half(512, 7);
  transport::tcp::FrameHeader first{transport::tcp::kFrameMagic, 0, 0, 0, 512, 1024};
  transport::tcp::FrameHeader next{transport::tcp::kFrameMagic, 0, 1, 0, 8, 8};
  REQUIRE(::write(raw[0], &first, sizeof first) == static_cast<ssize_t>(sizeof first));
  REQUIRE(::write(raw[0], half.data(), half.size()) == static_cast<ssize_t>(half.size()));
  REQUIRE(::write(raw[0], &next, sizeof next) == static_cast<ssize_t>(sizeof next));
  for (int i = 0; i < 200 && r->bytes() < 512; ++i) std::this_thread::sleep_for(5ms);
  REQUIRE(r->bytes() == 512);
  const auto start = std::chrono::steady_clock::now();
  ::close(raw[1]);
  CHECK_THROWS_WITH_AS(r->wait(core::Deadline::after(kWait)),
                       doctest::Contains("without a goodbye (EOF: it exited or crashed)"),
                       core::PeerError);
  CHECK(std::chrono::steady_clock::now() - start < 2s);
  ::close(raw[0]);
}

TEST_CASE("a failed receive has let go of its buffer: nothing is written into it afterwards") {
  // The peer streams message 0's second stripe on socket 1 as fast as it can while socket 0 ends
  // without a goodbye. The receive is read by the sockets' threads (a continuation, nobody
  // waits), so socket 1's thread is reading into the buffer when socket 0's thread finds the
  // failure. Once the request has failed (its continuation runs, its wait throws) the buffer is
  // the caller's again: not one more byte may land in it. The continuation looks at once, on
  // the failing thread, before anything else happens there: the stripe is read in order, so
  // its filled prefix (found by bisection, in microseconds) must not grow afterwards.
  RawPeerConnection peer = make_raw_peer_connection(2, core::Deadline::after(kWait));
  transport::tcp::TcpConnection& conn = *peer.conn;
  const std::vector<int>& raw = peer.raw;
  constexpr std::uint64_t kHalf = std::uint64_t{256} << 20;
  std::vector<unsigned char> buf(2 * kHalf, 0);
  RequestPtr r = conn.recv(buf.data(), buf.size());
  const auto filled = [&] {  // bytes of the stripe in buf: 0xab up to there, zeros after
    std::uint64_t lo = 0, hi = kHalf;
    while (lo < hi) {
      const std::uint64_t mid = (lo + hi) / 2;
      if (buf[kHalf + mid] != 0)
        lo = mid + 1;
      else
        hi = mid;
    }
    return lo;
  };
  std::promise<std::pair<std::uint64_t, std::uint64_t>> prefix;  // at the failure, 100 ms later
  r->then([&] {
    const std::uint64_t at_failure = filled();
    std::this_thread::sleep_for(100ms);  // the writer goes on meanwhile
    prefix.set_value({at_failure, filled()});
  });
  const transport::tcp::FrameHeader stripe{
      transport::tcp::kFrameMagic, 0, 0, kHalf, kHalf, 2 * kHalf};
  REQUIRE(::write(raw[1], &stripe, sizeof stripe) == static_cast<ssize_t>(sizeof stripe));
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> sent{0};
  ::fcntl(raw[1], F_SETFL, ::fcntl(raw[1], F_GETFL) & ~O_NONBLOCK);
  std::thread writer([&] {
    const std::vector<unsigned char> chunk(1 << 20, 0xab);
    while (sent.load() < kHalf && !stop.load()) {
      const ssize_t n = ::send(raw[1], chunk.data(), chunk.size(), MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<std::uint64_t>(n);
    }
  });
  // Far more than the socket buffers hold: socket 1's thread is streaming into buf.
  constexpr std::uint64_t kStreaming = std::uint64_t{32} << 20;
  for (int i = 0; i < 2000 && sent.load() < kStreaming; ++i) std::this_thread::sleep_for(5ms);
  const bool streaming = sent.load() >= kStreaming;
  ::close(raw[0]);
  CHECK_THROWS_AS(r->wait(core::Deadline::after(kWait)), core::PeerError);
  auto looked = prefix.get_future();
  REQUIRE(looked.wait_for(kWait) == std::future_status::ready);
  stop = true;
  ::shutdown(raw[1], SHUT_RDWR);
  writer.join();
  ::close(raw[1]);
  CHECK(streaming);
  const auto [at_failure, later] = looked.get();
  CHECK(at_failure > 0);
  CHECK(later == at_failure);
}

TEST_CASE("a silent peer is a timeout naming the operation") {
  TcpPair p = make_tcp_pair(1);
  std::vector<unsigned char> buf(16);
  RequestPtr r = p.a->recv(buf.data(), buf.size());
  CHECK_THROWS_WITH_AS(
      r->wait(core::Deadline::after(200ms)),
      doctest::Contains("rank 0 recv of up to 16 bytes from rank 1 (tcp): timed out"),
      core::TimeoutError);
  p.a->abort("test over");
  CHECK_THROWS_WITH_AS(r->wait(core::Deadline::after(1s)), doctest::Contains("aborted: test over"),
                       core::PeerError);
}

TEST_CASE("handshake refusals: stranger, wrong job, wrong rank; the listener keeps serving") {
  transport::tcp::Listener listener("127.0.0.1", 0, kToken, 0, 2);
  const auto deadline = core::Deadline::after(kWait);
  // a stranger sends garbage
  const int fd = raw_connect(listener.port());
  const char garbage[64] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  REQUIRE(::write(fd, garbage, sizeof garbage) == static_cast<ssize_t>(sizeof garbage));
  char byte;
  CHECK(::read(fd, &byte, 1) <= 0);  // closed (EOF or reset) without an answer
  ::close(fd);
  // another job
  CHECK_THROWS_WITH_AS(transport::tcp::connect_socket("127.0.0.1", listener.port(),
                                                      hello_from(1, 0, 0, 1, kToken + 1), deadline),
                       doctest::Contains("job token mismatch"), core::HandshakeError);
  // a rank outside the world
  CHECK_THROWS_WITH_AS(transport::tcp::connect_socket("127.0.0.1", listener.port(),
                                                      hello_from(7, 0, 0, 1), deadline),
                       doctest::Contains("unexpected rank"), core::HandshakeError);
  for (int i = 0; i < 100 && listener.refused() < 3; ++i) std::this_thread::sleep_for(10ms);
  CHECK(listener.refused() == 3);
  // the real peer still gets in
  auto dial = std::async(std::launch::async, [&] {
    return transport::tcp::connect_socket("127.0.0.1", listener.port(), hello_from(1, 0, 0, 1),
                                          deadline);
  });
  const int accepted = listener.take(1, 0, deadline);
  CHECK(accepted >= 0);
  ::close(accepted);
  ::close(dial.get());
}

TEST_CASE("a frame header claiming a huge length is refused without allocating") {
  transport::tcp::Listener listener("127.0.0.1", 0, kToken, 0, 2);
  const auto [accepted, raw] = handshaken_pair(listener, core::Deadline::after(kWait));
  const auto deadline = core::Deadline::after(kWait);
  transport::tcp::TcpConnection conn(0, 1, {accepted});
  transport::tcp::FrameHeader evil;
  evil.seq = 0;
  evil.length = evil.total = std::uint64_t{1} << 62;
  REQUIRE(::write(raw, &evil, sizeof evil) == static_cast<ssize_t>(sizeof evil));
  std::vector<unsigned char> buf(1024);
  CHECK_THROWS_WITH_AS(conn.recv(buf.data(), buf.size())->wait(deadline),
                       doctest::Contains("longer than the posted receive buffer"), core::PeerError);
  ::close(raw);
}

TEST_CASE("a taken port is a clear error") {
  transport::tcp::Listener first("127.0.0.1", 0, kToken, 0, 2);
  CHECK_THROWS_WITH_AS(transport::tcp::Listener("127.0.0.1", first.port(), kToken, 0, 2),
                       doctest::Contains("the port is taken"), core::Error);
}

TEST_CASE("connect retries until the listener appears, and gives up at the deadline") {
  // find a free port, then start listening on it a little later
  int port;
  {
    transport::tcp::Listener probe("127.0.0.1", 0, kToken, 0, 2);
    port = probe.port();
  }
  auto dial = std::async(std::launch::async, [&] {
    return transport::tcp::connect_socket("127.0.0.1", port, hello_from(1, 0, 0, 1),
                                          core::Deadline::after(kWait));
  });
  std::this_thread::sleep_for(300ms);
  {
    transport::tcp::Listener late("127.0.0.1", port, kToken, 0, 2);
    ::close(late.take(1, 0, core::Deadline::after(kWait)));
    ::close(dial.get());
  }
  // nobody listens any more
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH_AS(transport::tcp::connect_socket("127.0.0.1", port, hello_from(1, 0, 0, 1),
                                                      core::Deadline::after(300ms)),
                       doctest::Contains("could not connect to rank 0"), core::TimeoutError);
  CHECK(std::chrono::steady_clock::now() - start < 3s);
}

TEST_CASE("IPv6 loopback" * doctest::skip(!has_ipv6_loopback()) *
          doctest::description("needs an IPv6 loopback address (::1)")) {
  TcpPair p = make_tcp_pair(2, "::1");
  exchange(*p.a, *p.b, 100000, 3, kWait);
}

TEST_CASE("interface selection follows NCCL's syntax") {
  using transport::tcp::parse_ifname_spec;
  CHECK(parse_ifname_spec("eth").matches("eth0"));
  CHECK_FALSE(parse_ifname_spec("eth").matches("lo"));
  CHECK_FALSE(parse_ifname_spec("^lo,docker").matches("lo"));
  CHECK(parse_ifname_spec("^lo,docker").matches("eth1"));
  CHECK(parse_ifname_spec("=eth0").matches("eth0"));
  CHECK_FALSE(parse_ifname_spec("=eth0").matches("eth01"));
  CHECK(parse_ifname_spec("ib,eth").matches("ib0"));
  CHECK_THROWS_WITH_AS(parse_ifname_spec("^"), doctest::Contains("names no interface"),
                       core::ValueError);
  CHECK(transport::tcp::select_interface("", "127.0.0.1").loopback);
  CHECK(transport::tcp::select_interface("lo", "").name == "lo");
  CHECK_THROWS_WITH_AS(transport::tcp::select_interface("=nosuchif9", ""),
                       doctest::Contains("matches no interface"), core::ValueError);
}

TEST_CASE("a socket bbr would pace asks for cubic; one with another algorithm keeps it" *
          doctest::skip(!can_use_bbr()) *
          doctest::description("needs bbr, which this kernel lacks or refuses this process")) {
  const int paced = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(::setsockopt(paced, IPPROTO_TCP, TCP_CONGESTION, "bbr", 3) == 0);
  const std::string now = transport::tcp::unpace(paced);
  CHECK((now == "cubic" || now == "reno"));
  CHECK(congestion_of(paced) == now);
  ::close(paced);
  const int chosen = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(::setsockopt(chosen, IPPROTO_TCP, TCP_CONGESTION, "reno", 4) == 0);
  CHECK(transport::tcp::unpace(chosen) == "reno");
  ::close(chosen);
}

TEST_CASE("neither end of a loopback connection is paced by bbr, whatever the system's default") {
  transport::tcp::Listener listener("127.0.0.1", 0, kToken, 0, 2);
  const auto [accepted, dialed] = handshaken_pair(listener, core::Deadline::after(kWait));
  CHECK(congestion_of(accepted) != "bbr");
  CHECK(congestion_of(dialed) != "bbr");
  ::close(accepted);
  ::close(dialed);
}
