// The status board (collectives/status_board.h): entries round-trip through their JSON, a
// recorder's position names the oldest open op and the newest finished one, the assessment tells
// a silent rank, a rank busy outside collectives (a skew) and a stalled op apart, a publisher
// keeps its entry fresh in a real TCP store and answers a dump request, and a timed-out
// all-reduce says in its message that the rank it waited for was busy outside collectives. The
// drill with stopped processes is flight_recorder_drill.py.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/status_board.h"
#include "core/error.h"
#include "mesh_ranks.h"
#include "transport/tcp_store.h"

using namespace ringlet;
using namespace ringlet::collectives;
using namespace std::chrono_literals;

namespace {

constexpr std::int64_t kSecond = 1'000'000'000;

bool has(const std::vector<std::string>& lines, const std::string& text) {
  for (const std::string& line : lines) {
    if (line.find(text) != std::string::npos) return true;
  }
  return false;
}

// A rank's entry at `now`: published `age` ago, inside op `open_seq` since `open_for` (or
// outside collectives when open_seq < 0) after finishing `last_seq` `last_ago` before now.
RankStatus entry(int rank, std::int64_t now, std::int64_t age, std::int64_t open_seq,
                 std::int64_t open_for, std::int64_t last_seq, std::int64_t last_ago) {
  RankStatus s;
  s.rank = rank;
  s.world_size = 3;
  s.pid = 100 + rank;
  s.host = "h";
  s.time_ns = now - age;
  s.interval_ms = 500;
  s.recording = true;
  if (open_seq >= 0) {
    s.open =
        StatusMark{static_cast<std::uint64_t>(open_seq), "all_reduce", "started", now - open_for};
  }
  if (last_seq >= 0) {
    s.last =
        StatusMark{static_cast<std::uint64_t>(last_seq), "all_reduce", "completed", now - last_ago};
  }
  return s;
}

}  // namespace

TEST_CASE("status board: an entry round-trips through its JSON; a bad one is named") {
  const std::int64_t now = wall_now_ns();
  RankStatus s = entry(2, now, 0, 7, kSecond, 6, 2 * kSecond);
  s.failure = "rank 2: all_reduce seq 7 failed";
  const RankStatus back = RankStatus::from_json(s.to_json(), "key");
  CHECK(back.rank == 2);
  CHECK(back.pid == 102);
  CHECK(back.time_ns == s.time_ns);
  CHECK(back.failure == s.failure);
  REQUIRE(back.open);
  CHECK(back.open->seq == 7);
  CHECK(back.open->state == "started");
  REQUIRE(back.last);
  CHECK(back.last->time_ns == s.last->time_ns);
  CHECK_THROWS_WITH_AS(RankStatus::from_json("{\"rank\": 1}", "store key status/comm/1"),
                       doctest::Contains("store key status/comm/1"), core::ValueError);
}

TEST_CASE("status board: a recorder's position is its oldest open op and newest finished one") {
  FlightRecorder r(16);
  CHECK_FALSE(r.position().open);
  std::vector<std::uint64_t> ids;
  for (std::uint64_t seq = 0; seq < 4; ++seq) {
    FlightOp op;
    op.seq = seq;
    ids.push_back(r.issued(op));
  }
  r.completed(ids[0]);
  r.completed(ids[1]);
  r.started(ids[2]);
  const FlightPosition at = r.position();
  CHECK(at.enabled);
  CHECK(at.issued == 4);
  REQUIRE(at.open);
  CHECK(at.open->seq == 2);
  CHECK(std::string(at.open->state) == "started");
  REQUIRE(at.last);
  CHECK(at.last->seq == 1);
  CHECK(std::abs(at.open->time_ns - wall_now_ns()) < 5 * kSecond);
  CHECK_FALSE(FlightRecorder(0).position().enabled);
}

TEST_CASE("status board: silent, busy outside collectives, stalled, missing, healthy, ended") {
  const std::int64_t now = wall_now_ns();
  SUBCASE("a rank that stopped reporting is named first, and stuck past the threshold") {
    const std::vector<std::optional<RankStatus>> board = {
        entry(0, now, 0, 5, 3 * kSecond, 4, 3 * kSecond),
        entry(1, now, 3 * kSecond, 5, 3 * kSecond, 4, 3 * kSecond),
        entry(2, now, 0, 5, 3 * kSecond, 4, 3 * kSecond)};
    const StatusAssessment a = assess_status(board, now, 1s);
    CHECK(a.lagging == std::vector<int>{1});
    REQUIRE_FALSE(a.story.empty());
    CHECK(a.story[0].rfind("rank 1 (pid 101) has not reported for 3.0 s: stopped", 0) == 0);
    CHECK(a.stuck);
    CHECK_FALSE(assess_status(board, now, 30s).stuck);
  }
  SUBCASE("a rank busy outside collectives while the others wait is a skew") {
    const std::vector<std::optional<RankStatus>> board = {
        entry(0, now, 0, -1, 0, 4, 5 * kSecond), entry(1, now, 0, 5, 4 * kSecond, 4, 5 * kSecond),
        entry(2, now, 0, 5, 4 * kSecond, 4, 5 * kSecond)};
    const StatusAssessment a = assess_status(board, now, 30s);
    CHECK(a.lagging == std::vector<int>{0});
    CHECK(has(a.story,
              "rank 0 has not joined all_reduce #5: it is busy outside collectives for "
              "5.0 s (since all_reduce #4 ended); ranks 1, 2 wait in it for 4.0 s (a skew"));
    CHECK_FALSE(a.stuck);
  }
  SUBCASE("every rank inside one op for long: a stalled transfer") {
    const std::vector<std::optional<RankStatus>> board = {
        entry(0, now, 0, 5, 10 * kSecond, 4, 10 * kSecond),
        entry(1, now, 0, 5, 10 * kSecond, 4, 10 * kSecond),
        entry(2, now, 0, 5, 10 * kSecond, 4, 10 * kSecond)};
    const StatusAssessment a = assess_status(board, now, 5s);
    CHECK(a.lagging.empty());
    CHECK(has(a.story, "ranks 0, 1, 2 are all in all_reduce #5 for 10.0 s: no rank is missing"));
    CHECK(a.stuck);
    CHECK(has(a.ranks,
              "rank 1 (pid 101 on h): in all_reduce #5 (started) for 10.0 s; last "
              "finished all_reduce #4"));
  }
  SUBCASE("a rank with no entry, a healthy board, an ended one") {
    std::vector<std::optional<RankStatus>> board = {entry(0, now, 0, 9, 0, 8, 0),
                                                    entry(1, now, 0, -1, 0, 9, 0), std::nullopt};
    CHECK(has(assess_status(board, now, 30s).story, "rank 2 has published no status"));
    board[2] = entry(2, now, 0, 9, 0, 8, 0);
    const StatusAssessment healthy = assess_status(board, now, 30s);
    CHECK(healthy.story ==
          std::vector<std::string>{"healthy: every rank reporting, the newest op all_reduce #9"});
    CHECK_FALSE(healthy.stuck);
    for (auto& s : board) s->closed = true;
    CHECK(assess_status(board, now + 60 * kSecond, 1s).story ==
          std::vector<std::string>{"ended: every rank has closed its communicator"});
  }
}

TEST_CASE("status board: a publisher keeps its entry fresh, answers a dump request, and closes") {
  transport::TcpStoreServer server("127.0.0.1", 0);
  transport::TcpStore store("127.0.0.1", server.port(), core::Deadline::after(10s));
  std::atomic<int> dumps{0}, snapshots{0};
  {
    RankStatus identity;
    identity.rank = 0;
    identity.world_size = 1;
    StatusPublisher publisher(
        store.another_client(5s), "comm", identity, 20ms,
        [&](RankStatus& s) {
          ++snapshots;
          s.recording = true;
          s.last = StatusMark{3, "all_reduce", "completed", wall_now_ns()};
        },
        [&] { ++dumps; });
    CHECK(store.get(status_world_key("comm"), core::Deadline::after(5s)) == "1");
    const auto first = read_status_board(store, "comm", 1, 5s);
    REQUIRE(first[0]);
    CHECK(first[0]->last->seq == 3);
    store.add(status_dump_key("comm"), 1);
    for (int i = 0; i < 250 && dumps == 0; ++i) std::this_thread::sleep_for(20ms);
    CHECK(dumps == 1);
    const int before = snapshots;
    std::this_thread::sleep_for(200ms);
    CHECK(snapshots > before);  // still publishing
    const auto later = read_status_board(store, "comm", 1, 5s);
    CHECK(later[0]->time_ns > first[0]->time_ns);
  }
  const auto closed = read_status_board(store, "comm", 1, 5s);
  REQUIRE(closed[0]);
  CHECK(closed[0]->closed);
  CHECK(store.compare_set(kStatusNamesKey, "\n", "\n") == "comm\n");
}

// A store whose server stopped (rank 0's, when a rank died) is not asked again: reconnecting
// would wait out the store's timeout (30 s here) at every interval and in the closing publish, and
// the communicator's teardown waits for the publisher.
TEST_CASE("status board: a publisher whose store's server stopped gives it up and closes at once") {
  auto server = std::make_unique<transport::TcpStoreServer>("127.0.0.1", 0);
  transport::TcpStore store("127.0.0.1", server->port(), core::Deadline::after(10s));
  std::atomic<int> snapshots{0};
  RankStatus identity;
  identity.rank = 0;
  identity.world_size = 1;
  auto publisher = std::make_unique<StatusPublisher>(
      store.another_client(30s), "comm", identity, 20ms, [&](RankStatus&) { ++snapshots; }, [] {});
  for (int i = 0; i < 250 && snapshots < 2; ++i) std::this_thread::sleep_for(20ms);
  REQUIRE(snapshots >= 2);
  server->stop();
  std::this_thread::sleep_for(200ms);  // its next publish fails: the server closed it
  const int after_stop = snapshots;
  std::this_thread::sleep_for(200ms);
  CHECK(snapshots == after_stop);  // no more attempts
  const auto start = std::chrono::steady_clock::now();
  publisher.reset();
  CHECK(std::chrono::steady_clock::now() - start < 2s);
}

TEST_CASE("status board: a timed-out all-reduce says the rank it waited for is busy outside") {
  transport::TcpStoreServer server("127.0.0.1", 0);
  std::string error;
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      transport::TcpStore store("127.0.0.1", server.port(), core::Deadline::after(10s));
      CommOptions options;
      options.timeout = 1500ms;
      options.status_interval_ms = 50;
      auto comm = Communicator::create(store, testing::mesh_options(r, 2, "tcp", "m"), options,
                                       core::Deadline::after(30s));
      std::vector<float> x(16, 1.0f);
      comm->all_reduce(x.data(), x.data(), x.size(), core::DType::f32, ReduceOp::sum)->wait();
      if (r == 1) std::this_thread::sleep_for(2500ms);  // busy outside collectives
      try {
        comm->all_reduce(x.data(), x.data(), x.size(), core::DType::f32, ReduceOp::sum)->wait();
      } catch (const core::Error& e) {
        if (r == 0) error = e.what();
      }
    });
  }
  for (auto& t : ranks) t.join();
  INFO(error);
  CHECK(error.find("status board: rank 1 has not joined all_reduce #1: it is busy outside "
                   "collectives") != std::string::npos);
  CHECK(error.find("a skew") != std::string::npos);
}
