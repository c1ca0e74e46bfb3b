// Where shm messages lie in the ring: a joined send is one frame, every payload starts 8-byte
// aligned, a receive in place hands the message over where it lies (and is refused across the
// ring's end), and a stream of messages goes back to the ring's start, behind a skip every way of
// receiving steps over, unless a long message went round the ring since it last did; a reader
// that waits for a whole message waits until all of it is there.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "connection_checks.h"
#include "shm_pair.h"
#include "transport/shm/connection.h"
#include "transport/shm/ring.h"

using namespace ringlet;
using namespace std::chrono_literals;
using testing::make_small_ring_pair;
using testing::pattern;
using transport::RequestPtr;
using transport::ShmRing;
using transport::ShmRingControl;

namespace {

const auto kWait = 20s;

}  // namespace

TEST_CASE(
    "shm: a joined send is one message, head then body; at once where the ring has room, else "
    "queued in order behind what went before it, its head copied, longer than the ring too") {
  // A ring of 4 KiB, so that one message not yet received fills it.
  auto p = make_small_ring_pair("joined");
  const auto head = pattern(16, 1), body = pattern(1000, 2), big = pattern(10000, 3);
  std::vector<unsigned char> in(2000, 0);
  RequestPtr sent = p->a->try_send_joined({head.data(), head.size()}, {body.data(), body.size()});
  REQUIRE(sent != nullptr);
  CHECK(sent->done());
  RequestPtr got = p->b->recv(in.data(), in.size());
  got->wait(core::Deadline::after(kWait));
  REQUIRE(got->bytes() == head.size() + body.size());
  CHECK(std::equal(head.begin(), head.end(), in.begin()));
  CHECK(std::equal(body.begin(), body.end(), in.begin() + 16));
  CHECK(p->a->bytes_sent() == head.size() + body.size());

  // Behind a message larger than the ring, which waits for the peer: queued after it, not
  // before. Its head is the request's own copy: the caller's may change at once.
  RequestPtr first = p->a->send(big.data(), big.size());
  auto changing_head = head;
  RequestPtr queued =
      p->a->try_send_joined({changing_head.data(), changing_head.size()}, {body.data(), 100});
  REQUIRE(queued != nullptr);
  std::fill(changing_head.begin(), changing_head.end(), 0);
  // A joined message larger than the ring: streamed through it, head first.
  const auto most = pattern(9000, 4);
  RequestPtr longer = p->a->try_send_joined({head.data(), head.size()}, {most.data(), most.size()});
  REQUIRE(longer != nullptr);
  std::vector<unsigned char> in_big(big.size()), in_queued(200), in_longer(9016);
  p->b->recv(in_big.data(), in_big.size())->wait(core::Deadline::after(kWait));
  RequestPtr next = p->b->recv(in_queued.data(), in_queued.size());
  next->wait(core::Deadline::after(kWait));
  RequestPtr last = p->b->recv(in_longer.data(), in_longer.size());
  last->wait(core::Deadline::after(kWait));
  for (const RequestPtr& r : {first, queued, longer}) r->wait(core::Deadline::after(kWait));
  CHECK(in_big == big);
  REQUIRE(next->bytes() == 116);
  CHECK(std::equal(head.begin(), head.end(), in_queued.begin()));
  CHECK(std::equal(body.begin(), body.begin() + 100, in_queued.begin() + 16));
  REQUIRE(last->bytes() == 9016);
  CHECK(std::equal(head.begin(), head.end(), in_longer.begin()));
  CHECK(std::equal(most.begin(), most.end(), in_longer.begin() + 16));
  CHECK(longer->bytes() == 9016);
  // A head longer than a request holds is refused, nothing sent.
  const auto long_head = pattern(transport::kShmJoinedHeadMax + 1, 5);
  CHECK(p->a->try_send_joined({long_head.data(), long_head.size()}, {body.data(), 10}) == nullptr);
  CHECK(p->a->bytes_sent() == head.size() + body.size() + big.size() + 116 + 9016);
}

TEST_CASE(
    "shm: a message received in place is the message, then consumed; refused with nothing "
    "received behind a posted receive, across the ring's end, when longer than allowed or than "
    "the ring, at the deadline, and when the reader throws or declines") {
  auto p = make_small_ring_pair("inplace");
  REQUIRE(p->b->receives_in_place(4096));
  CHECK_FALSE(p->b->receives_in_place(std::size_t{64} << 20));  // not sent at once: posted first
  const auto deadline = [] { return core::Deadline::after(kWait); };
  std::vector<unsigned char> got;
  const transport::Connection::InPlace take = [&](const std::byte* m, std::size_t n) {
    const auto* u = reinterpret_cast<const unsigned char*>(m);
    got.assign(u, u + n);
    return true;
  };
  auto receive = [&](std::size_t bytes) {  // the usual way
    std::vector<unsigned char> in(bytes);
    RequestPtr r = p->b->recv(in.data(), in.size());
    r->wait(deadline());
    in.resize(r->bytes());
    return in;
  };
  const auto one = pattern(1000, 1), two = pattern(1500, 2), three = pattern(300, 3);
  // In place, then the next message is the next one.
  p->a->send(one.data(), one.size())->wait(deadline());
  p->a->send(two.data(), two.size())->wait(deadline());
  CHECK(p->b->recv_in_place(take, 4096, deadline()));
  CHECK(got == one);
  CHECK(receive(2000) == two);
  CHECK(p->b->bytes_received() == one.size() + two.size());
  // Behind a posted receive: refused; the posted receive gets the message.
  std::vector<unsigned char> in(2000);
  RequestPtr posted = p->b->recv(in.data(), in.size());
  CHECK_FALSE(p->b->recv_in_place(take, 4096, deadline()));
  p->a->send(three.data(), three.size())->wait(deadline());
  posted->wait(deadline());
  CHECK(std::equal(three.begin(), three.end(), in.begin()));
  // So far 40 bytes of connecting, then 8 + 1000 and 8 + 1504 (frames padded to 8 bytes); the
  // ring was empty past its first quarter when the 300 bytes were sent, so they went to its start
  // (8 + 304): a 3800-byte message from there wraps round the ring's end. Refused, it arrives
  // whole the usual way.
  const auto wraps = pattern(3800, 5);
  p->a->send(wraps.data(), wraps.size())->wait(deadline());
  got.clear();
  CHECK_FALSE(p->b->recv_in_place(take, 4096, deadline()));
  CHECK(got.empty());
  CHECK(receive(4096) == wraps);
  // Longer than allowed: left for the usual receive.
  p->a->send(one.data(), one.size())->wait(deadline());
  CHECK_FALSE(p->b->recv_in_place(take, 999, deadline()));
  CHECK(receive(1000) == one);
  // Nothing comes: false at the deadline.
  const auto start = std::chrono::steady_clock::now();
  CHECK_FALSE(p->b->recv_in_place(take, 4096, core::Deadline::after(50ms)));
  CHECK(std::chrono::steady_clock::now() - start < 5s);
  // The reader throws: the message stays, and the usual receive gets it.
  p->a->send(three.data(), three.size())->wait(deadline());
  const transport::Connection::InPlace refuse = [](const std::byte*, std::size_t) -> bool {
    throw core::ValueError("not this one");
  };
  CHECK_THROWS_AS(p->b->recv_in_place(refuse, 4096, deadline()), core::ValueError);
  // The reader declines: the message stays too.
  const transport::Connection::InPlace decline = [](const std::byte*, std::size_t) {
    return false;
  };
  CHECK_FALSE(p->b->recv_in_place(decline, 4096, deadline()));
  CHECK(receive(1000) == three);
  // Longer than the ring: it can never lie there whole, so refused at once (not at the
  // deadline, holding the read end while the writer waits for room), and received as usual.
  const auto big = pattern(6000, 4);
  RequestPtr sending = p->a->send(big.data(), big.size());
  const auto before = std::chrono::steady_clock::now();
  CHECK_FALSE(p->b->recv_in_place(take, 8192, core::Deadline::after(20s)));
  CHECK(std::chrono::steady_clock::now() - before < 5s);
  CHECK(receive(8192) == big);
  sending->wait(deadline());
}

TEST_CASE(
    "shm: every message starts 8-byte aligned in the ring, after messages of any length sent "
    "either way") {
  auto p = make_small_ring_pair("aligned");
  const auto deadline = [] { return core::Deadline::after(kWait); };
  std::vector<std::uintptr_t> starts;
  std::vector<unsigned char> got;
  const transport::Connection::InPlace take = [&](const std::byte* m, std::size_t n) {
    starts.push_back(reinterpret_cast<std::uintptr_t>(m));
    const auto* u = reinterpret_cast<const unsigned char*>(m);
    got.assign(u, u + n);
    return true;
  };
  // Lengths 1..9 each way in turn: posted sends (inline or through the progress thread), joined
  // sends, and one larger than the ring (streamed in chunks) between them.
  const auto odd = pattern(9, 5), head = pattern(3, 6), big = pattern(5001, 7);
  for (std::size_t n = 1; n <= odd.size(); ++n) {
    const auto message = std::vector<unsigned char>(odd.begin(), odd.begin() + n);
    p->a->send(message.data(), n)->wait(deadline());
    REQUIRE(p->b->recv_in_place(take, 4096, deadline()));
    CHECK(got == message);
    RequestPtr joined = p->a->try_send_joined({head.data(), head.size()}, {message.data(), n});
    REQUIRE(joined != nullptr);
    REQUIRE(p->b->recv_in_place(take, 4096, deadline()));
    CHECK(got.size() == head.size() + n);
    if (n == 5) {
      RequestPtr sent = p->a->send(big.data(), big.size());
      std::vector<unsigned char> in(big.size());
      p->b->recv(in.data(), in.size())->wait(deadline());
      sent->wait(deadline());
      CHECK(in == big);
    }
  }
  REQUIRE(starts.size() == 2 * odd.size());
  for (const std::uintptr_t start : starts) CHECK(start % 8 == 0);
}

TEST_CASE(
    "shm ring: a writer goes back to the start only from an empty ring a quarter and the message "
    "past it, and never once told not to; the reader steps over a skip only where it is all there "
    "and ends at the ring's "
    "end") {
  ShmRingControl control;
  ShmRing::init(&control);
  std::vector<std::byte> data(4096);
  ShmRing writer(&control, data.data(), data.size()), reader(&control, data.data(), data.size());
  std::vector<unsigned char> in = pattern(1536, 7), out(1536);
  REQUIRE(writer.write_some(in.data(), 1000) == 1000);
  CHECK(writer.rewind_bytes(512) == 0);  // the reader is behind
  REQUIRE(writer.write_some(in.data() + 1000, 536) == 536);
  REQUIRE(reader.read_some(out.data(), out.size()) == out.size());
  CHECK(out == in);
  // Empty, 1536 bytes in: room for 512 bytes behind a quarter (1024) before it, not for 520.
  CHECK(writer.rewind_bytes(520) == 0);
  writer.set_going_back(false);  // as a connection whose two sides sat apart
  CHECK(writer.rewind_bytes(512) == 0);
  writer.set_going_back(true);
  REQUIRE(writer.rewind_bytes(512) == 4096 - 1536);
  const char message[] = "at the start";
  REQUIRE(writer.try_write_all({{nullptr, 4096 - 1536}, {message, sizeof message}}));
  CHECK_FALSE(reader.skip_to_start(100));   // does not end at the ring's end
  CHECK_FALSE(reader.skip_to_start(4096));  // more than is there
  REQUIRE(reader.skip_to_start(4096 - 1536));
  char got[sizeof message] = {};
  REQUIRE(reader.read_some(got, sizeof got) == sizeof got);
  CHECK(std::string(got) == message);
  CHECK(std::memcmp(data.data(), message, sizeof message) == 0);  // it lies at the start
}

TEST_CASE(
    "shm ring: a pass round the ring that carried a message over 256 KiB walks on to the ring's "
    "end; the next pass goes back to the start again") {
  constexpr std::size_t kRing = 4 << 20, kShort = 4096;
  constexpr std::size_t kLong = ShmRing::kRewindLongestBytes + kShort;
  ShmRingControl control;
  ShmRing::init(&control);
  std::vector<std::byte> data(kRing);
  ShmRing writer(&control, data.data(), data.size()), reader(&control, data.data(), data.size());
  std::vector<unsigned char> in = pattern(kLong, 3), out(kLong);
  // Writes n bytes and reads them back: the ring is empty again.
  const auto pass_through = [&](std::size_t n) {
    REQUIRE(writer.try_write_all({{in.data(), n}}));
    std::size_t read = 0;
    for (std::size_t k = 1; read < n && k > 0; read += k) {
      k = reader.read_some(out.data() + read, n - read);
    }
    REQUIRE(read == n);
  };
  // Short messages a quarter and a long one in: a long one is not put back at the start, a short
  // one is.
  for (std::size_t at = 0; at < kRing / 4 + kLong; at += kShort) pass_through(kShort);
  CHECK(writer.rewind_bytes(kLong) == 0);
  const std::size_t skip = writer.rewind_bytes(kShort);
  REQUIRE(skip > 0);
  REQUIRE(writer.try_write_all({{nullptr, skip}}));
  REQUIRE(reader.skip_to_start(skip));
  // A long one in this pass: the short ones after it walk on, however far past a quarter.
  pass_through(kLong);
  std::size_t walked = kLong;
  for (; walked + kShort <= kRing; walked += kShort) {
    CHECK(writer.rewind_bytes(kShort) == 0);
    pass_through(kShort);
  }
  CHECK(walked > kRing / 2);
  // Round the end (the next write wraps to the start): a new pass of short messages rewinds.
  pass_through(kRing - walked);
  for (std::size_t k = 0; k < kRing / kShort && writer.rewind_bytes(kShort) == 0; ++k) {
    pass_through(kShort);
  }
  CHECK(writer.rewind_bytes(kShort) == kRing - (kRing / 4 + kShort));
}

TEST_CASE(
    "shm: a stream of messages cycles through a quarter of the ring and a message, a quarter of "
    "it left free; not while the reader is behind; every way of receiving steps over the skip") {
  auto p = make_small_ring_pair("rewind");
  const auto deadline = [] { return core::Deadline::after(kWait); };
  const std::byte* at = nullptr;
  std::vector<unsigned char> got;
  const transport::Connection::InPlace take = [&](const std::byte* m, std::size_t n) {
    at = m;
    const auto* u = reinterpret_cast<const unsigned char*>(m);
    got.assign(u, u + n);
    return true;
  };
  const auto receive_in_place = [&](const std::vector<unsigned char>& sent) {
    p->a->send(sent.data(), sent.size())->wait(deadline());
    REQUIRE(p->b->recv_in_place(take, 4096, deadline()));
    CHECK(got == sent);
    return at;
  };
  // Frames of 512 bytes (8 + 504). The ring (4096) goes back to its start when it is empty and
  // the write position is at least a quarter (1024) and a frame past it: at 1536.
  const auto first = pattern(1600, 100);
  receive_in_place(first);  // 56 bytes of connecting, then 1608: past 1536
  std::vector<const std::byte*> where;
  for (int k = 0; k < 9; ++k) where.push_back(receive_in_place(pattern(504, k)));
  for (int k = 0; k < 9; ++k) CHECK(where[k] == where[0] + 512 * (k % 3));
  // Three sent before any is read: the first goes to the start, and the two after it fit in the
  // quarter left before the skip the reader has not yet stepped over.
  const std::vector<std::vector<unsigned char>> three = {pattern(504, 10), pattern(504, 11),
                                                         pattern(504, 12)};
  for (const auto& m : three) p->a->send(m.data(), m.size())->wait(deadline());
  for (std::size_t i = 0; i < three.size(); ++i) {
    REQUIRE(p->b->recv_in_place(take, 4096, deadline()));
    CHECK(got == three[i]);
    CHECK(at == where[0] + 512 * i);
  }
  // Skips before messages the waiting thread moves, and before ones the progress thread moves (a
  // receive posted first, into more room than a waiter moves): three of each, one of every three
  // skipped to.
  std::vector<unsigned char> in(600), large(300 * 1024);
  for (int k = 0; k < 3; ++k) {
    const auto sent = pattern(504, 20 + k);
    p->a->send(sent.data(), sent.size())->wait(deadline());
    RequestPtr r = p->b->recv(in.data(), in.size());
    r->wait(deadline());
    CHECK(std::equal(sent.begin(), sent.end(), in.begin()));
  }
  for (int k = 0; k < 3; ++k) {
    const auto sent = pattern(504, 30 + k);
    RequestPtr r = p->b->recv(large.data(), large.size());
    p->a->send(sent.data(), sent.size())->wait(deadline());
    r->wait(deadline());
    CHECK(r->bytes() == sent.size());
    CHECK(std::equal(sent.begin(), sent.end(), large.begin()));
  }
  CHECK(p->b->bytes_received() == 1600 + 18 * 504);
}

TEST_CASE(
    "shm ring: a reader waiting for a whole message is not woken by part of it; with part there it "
    "looks again between other threads' turns rather than sleeping, and finds the rest") {
  ShmRingControl control;
  ShmRing::init(&control);
  std::vector<std::byte> data(4096);
  ShmRing writer(&control, data.data(), data.size()), reader(&control, data.data(), data.size());
  const std::vector<unsigned char> message = pattern(1000, 9);
  REQUIRE(writer.write_some(message.data(), 400) == 400);
  CHECK(reader.wait_readable(std::chrono::microseconds(1000), 400));
  CHECK(reader.wait_readable(std::chrono::microseconds(1000)));  // any byte: there at once
  // Part of it there: false, after a window of looks, not a sleep of the whole wait.
  const auto before = std::chrono::steady_clock::now();
  CHECK_FALSE(reader.wait_readable(std::chrono::microseconds(kWait), 1000));
  CHECK(std::chrono::steady_clock::now() - before < kWait / 4);

  // The rest comes 50 ms later; the reader's waits end once all of it is there.
  std::thread late([&] {
    std::this_thread::sleep_for(50ms);
    writer.write_some(message.data() + 400, 600);
  });
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  bool whole = false;
  while (!whole && std::chrono::steady_clock::now() < deadline) {
    whole = reader.wait_readable(std::chrono::microseconds(10000), 1000);
  }
  late.join();
  REQUIRE(whole);
  std::vector<unsigned char> out(1000);
  REQUIRE(reader.read_some(out.data(), out.size()) == out.size());
  CHECK(out == message);
}
