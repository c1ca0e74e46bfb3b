// The flight recorder (collectives/flight_recorder.h) and the story told from its dumps
// (flight_analysis.h): the ring keeps the newest records, states and failures round-trip through
// the JSON, and diagnose names a desync with both ops, a rank that never joined, a rank that
// stalled, and the missing dumps of a stopped and of a killed rank; two communicators over tcp, one
// of whose ranks skips an op, leave dumps that diagnose reads as that desync. The drill over real
// jobs is flight_recorder_drill.py.
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <vector>

#include "collectives/flight_analysis.h"
#include "collectives/flight_recorder.h"
#include "comm_ranks.h"
#include "temp_dir.h"

using namespace ringlet::collectives;

namespace {

FlightOp all_reduce(std::uint64_t seq, std::size_t count = 4) {
  FlightOp op;
  op.seq = seq;
  op.count = count;
  op.bytes = count * 4;
  op.algorithm = "ring";
  return op;
}

// A rank's dump, written and parsed back.
FlightDump dump_of(FlightRecorder& r, int rank, int world) {
  return parse_flight_dump(r.dump_json(rank, world, "comm", "test"), "rank.json");
}

std::vector<std::string> story(const std::vector<FlightDump>& dumps) {
  return diagnose_flight(dumps);
}

bool has(const std::vector<std::string>& lines, const std::string& text) {
  for (const std::string& line : lines) {
    if (line.find(text) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("flight recorder: off records nothing; the ring keeps the newest; states round-trip") {
  FlightRecorder off(0);
  CHECK(off.issued(all_reduce(0)) == 0);
  CHECK(parse_flight_dump(off.dump_json(0, 1, "comm", ""), "x").entries.empty());

  FlightRecorder r(3);
  std::vector<std::uint64_t> ids;
  for (std::uint64_t seq = 0; seq < 5; ++seq) ids.push_back(r.issued(all_reduce(seq)));
  r.completed(ids[0]);  // overwritten: ignored
  r.started(ids[3]);
  r.completed(ids[2]);
  r.failed(ids[4], "rank 0 recv timed out", true, 2, 96);
  const FlightDump d = dump_of(r, 0, 3);
  REQUIRE(d.entries.size() == 3);
  CHECK(d.entries[0].seq == 2);
  CHECK(d.entries[0].state == "completed");
  CHECK(d.entries[1].state == "started");
  CHECK(d.entries[2].state == "failed");
  CHECK(d.entries[2].waiting_on == 2);
  CHECK(d.entries[2].bytes_done == 96);
  CHECK(d.entries[2].timed_out);
  CHECK(d.entries[2].op == "all_reduce");
  CHECK(d.entries[2].dtype == "f32");
  CHECK(d.entries[2].count == 4);
  CHECK(d.world_size == 3);
}

TEST_CASE("flight analysis: a stopped rank, a killed rank, a desync, a rank that never joined") {
  // Ranks 0 and 2 completed ops 0-1 and timed out in op 2 waiting on rank 1, which left no dump.
  FlightRecorder r0(10), r2(10);
  for (std::uint64_t seq = 0; seq < 2; ++seq) {
    r0.completed(r0.issued(all_reduce(seq)));
    r2.completed(r2.issued(all_reduce(seq)));
  }
  r0.failed(r0.issued(all_reduce(2)), "timed out", true, 1, 64);
  r2.failed(r2.issued(all_reduce(2)), "timed out", true, 1, 0);
  std::vector<std::string> lines = story({dump_of(r0, 0, 3), dump_of(r2, 2, 3)});
  REQUIRE(!lines.empty());
  CHECK(lines[0].find("rank 1 never joined op #2") == 0);
  CHECK(has(lines, "rank 0 stalled in op #2"));
  CHECK(has(lines, "waiting on rank 1 after 64 bytes"));
  CHECK(has(lines, "2 of 3 ranks left a dump; none from rank 1"));

  // The same, but their connections to rank 1 failed (it died).
  FlightRecorder k0(10), k2(10);
  k0.failed(k0.issued(all_reduce(0)), "the peer process exited", false, 1, 0);
  k2.failed(k2.issued(all_reduce(0)), "the peer process exited", false, 1, 0);
  lines = story({dump_of(k0, 0, 3), dump_of(k2, 2, 3)});
  CHECK(lines[0].find("rank 1 died") == 0);

  // Rank 1 issued a broadcast where rank 0 issued the all-reduce: a desync, both ops named.
  FlightRecorder a(10), b(10);
  a.completed(a.issued(all_reduce(0)));
  b.completed(b.issued(all_reduce(0)));
  a.failed(a.issued(all_reduce(1, 8)), "fingerprint mismatch", false, 1, 0);
  FlightOp broadcast = all_reduce(1, 2);
  broadcast.kind = OpKind::broadcast;
  b.failed(b.issued(broadcast), "fingerprint mismatch", false, 0, 0);
  lines = story({dump_of(a, 0, 2), dump_of(b, 1, 2)});
  CHECK(has(lines,
            "desync at op #1: rank 0 issued all_reduce f32 x 8, rank 1 issued broadcast f32 x 2"));

  // Rank 1 is still at op 0 when rank 0 stalls in op 1: it never joined op 1.
  FlightRecorder c(10), e(10);
  c.completed(c.issued(all_reduce(0)));
  c.failed(c.issued(all_reduce(1)), "timed out", true, 1, 0);
  e.started(e.issued(all_reduce(0)));
  lines = story({dump_of(c, 0, 2), dump_of(e, 1, 2)});
  CHECK(has(lines, "rank 1 was in op #0"));
}

TEST_CASE("flight analysis: a file that is not a dump is named") {
  CHECK_THROWS_WITH(parse_flight_dump("{\"rank\": 1}", "/d/rank1.json"),
                    doctest::Contains("/d/rank1.json is not a flight recorder dump"));
  CHECK_THROWS_WITH(read_flight_dumps("/nonexistent-dir-of-dumps"),
                    doctest::Contains("/nonexistent-dir-of-dumps"));
}

TEST_CASE("flight recorder, end to end: a rank skips an op; diagnose names the desync, both ops") {
  ringlet::testing::TempDir dir("ringlet_fr_desync");
  CommOptions options;
  options.timeout = std::chrono::seconds(10);
  options.flight_recorder_dir = dir.path.string();
  ringlet::testing::run_comm(2, "tcp", options, [&](int rank, Communicator& comm) {
    std::vector<float> x(8, 1.0f);
    comm.all_reduce(x.data(), x.data(), 8, ringlet::core::DType::f32, ReduceOp::sum)->wait();
    try {
      if (rank == 1) {  // skips the second all-reduce: its broadcast meets rank 0's all-reduce
        comm.broadcast(x.data(), 2, ringlet::core::DType::f32, 0)->wait();
      } else {
        comm.all_reduce(x.data(), x.data(), 8, ringlet::core::DType::f32, ReduceOp::sum)->wait();
      }
      CHECK_MESSAGE(false, "rank ", rank, ": the mismatched op completed");
    } catch (const ringlet::core::Error& e) {
      CHECK(std::string(e.what()).find("seq 1") != std::string::npos);
    }
  });
  const std::vector<std::string> lines = story(read_flight_dumps(dir.path.string()));
  INFO(ringlet::core::join(lines, "\n"));
  CHECK(has(lines,
            "desync at op #1: rank 0 issued all_reduce f32 x 8, rank 1 issued broadcast f32 x 2"));
}
