// collectives/trace and `ringlet trace merge`: events recorded from several threads come back
// from the rank file with every field; a tracer opened later and paused keeps only what it
// recorded while on, compute spans and instants on the "compute" row; merge joins rank files with
// one process per rank; malformed files, empty directories and bad command lines are errors that
// name the culprit. The ringlet binary is RINGLET_BINARY (compiled in by tests/meson.build, or from
// the environment variable of the same name).
#include <doctest/doctest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "collectives/trace.h"
#include "collectives/trace_files.h"
#include "core/error.h"
#include "ringlet_command.h"
#include "temp_dir.h"

using namespace ringlet::collectives;
using namespace ringlet::testing;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

using ringlet::testing::TempDir;

// A fresh directory under /tmp, removed with everything in it at the end of the test.
TraceEvent make_event(int seq, int step, int channel) {
  TraceEvent e;
  e.op = "all_reduce";
  e.seq = static_cast<std::uint64_t>(seq);
  e.step = step;
  e.phase = step < 3 ? "RS" : "AG";
  e.chunk = step % 4;
  e.peer = (step + 1) % 4;
  e.channel = channel;
  e.bytes = 1024u * static_cast<std::uint64_t>(step + 1);
  e.start = std::chrono::steady_clock::now();
  e.end = e.start + std::chrono::microseconds(5 + step);
  return e;
}

json read_json(const fs::path& path) {
  std::ifstream in(path);
  REQUIRE(in.is_open());
  return json::parse(in);
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ringlet::core::Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::size_t count_phase(const json& events, const std::string& ph) {
  std::size_t n = 0;
  for (const json& e : events) n += e.at("ph") == ph;
  return n;
}

CommandResult run_ringlet(const std::string& args) {
  return finish_command(start_command("'" + ringlet_binary() + "' " + args));
}

}  // namespace

TEST_CASE("tracer: a channel's host ring has a row of its own, named after the channel") {
  TempDir tmp;
  {
    Tracer tracer(tmp.path.string(), 0);
    tracer.record(make_event(1, 0, 1));
    tracer.record(make_event(1, 1, kHostRingLane + 1));
  }
  const json doc = read_json(tmp.path / "trace.rank0.json");
  std::map<int, std::string> names;  // tid -> thread_name
  for (const json& e : doc.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "thread_name") {
      names[e.at("tid")] = e.at("args").at("name");
    }
  }
  CHECK(names ==
        std::map<int, std::string>{{1, "channel 1"}, {kHostRingLane + 1, "channel 1 host ring"}});
  CHECK(lane_label(1) == "1");
  CHECK(lane_label(kHostRingLane + 1) == "1h");
  CHECK(lane_label(kComputeLane) == "1000");
}

TEST_CASE("tracer: events from two threads come back with every field") {
  TempDir tmp;
  const fs::path dir = tmp.path / "nested" / "traces";  // created by the tracer
  const auto before = std::chrono::steady_clock::now();
  {
    Tracer tracer(dir.string(), 3);
    CHECK(tracer.enabled());
    std::vector<std::thread> threads;
    for (int channel = 0; channel < 2; ++channel) {
      threads.emplace_back([&tracer, channel] {
        for (int step = 0; step < 50; ++step) tracer.record(make_event(7, step, channel));
      });
    }
    for (auto& t : threads) t.join();
    tracer.flush();
  }  // the destructor flushes again: same content
  const json doc = read_json(dir / "trace.rank3.json");
  CHECK(doc.at("displayTimeUnit") == "ns");
  const json& events = doc.at("traceEvents");
  CHECK(count_phase(events, "X") == 100);

  std::set<std::string> metadata;
  std::set<std::pair<int, int>> seen;  // (channel, step)
  const double before_us =
      std::chrono::duration<double, std::micro>(before.time_since_epoch()).count();
  for (const json& e : events) {
    CHECK(e.at("pid") == 3);
    if (e.at("ph") == "M") {
      metadata.insert(e.at("name").get<std::string>());
      if (e.at("name") == "process_name") CHECK(e.at("args").at("name") == "rank 3");
      if (e.at("name") == "process_sort_index") CHECK(e.at("args").at("sort_index") == 3);
      continue;
    }
    const json& args = e.at("args");
    const int step = args.at("step");
    const int channel = e.at("tid");
    seen.insert({channel, step});
    CHECK(e.at("name") == (step < 3 ? "RS" : "AG") + std::string(" step ") + std::to_string(step));
    CHECK(e.at("cat") == "all_reduce");
    CHECK(args.at("op") == "all_reduce");
    CHECK(args.at("seq") == 7);
    CHECK(args.at("phase") == (step < 3 ? "RS" : "AG"));
    CHECK(args.at("chunk") == step % 4);
    CHECK(args.at("peer") == (step + 1) % 4);
    CHECK(args.at("bytes") == 1024 * (step + 1));
    // ts is steady_clock time in microseconds: comparable with this process's clock.
    CHECK(e.at("ts").get<double>() >= before_us);
    CHECK(e.at("dur").get<double>() == doctest::Approx(5 + step).epsilon(1e-6));
  }
  CHECK(seen.size() == 100);
  CHECK(metadata == std::set<std::string>{"process_name", "process_sort_index", "thread_name"});
  // Only the final file is left behind, no temporaries.
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir)) ++files;
  CHECK(files == 1);
}

TEST_CASE("tracer: disabled with an empty directory; a bad directory is an error naming it") {
  Tracer off("", 0);
  CHECK_FALSE(off.enabled());
  off.record(make_event(0, 0, 0));
  off.flush();  // writes nothing, throws nothing

  TempDir tmp;
  const fs::path file = tmp.path / "not_a_dir";
  std::ofstream(file) << "x";
  const std::string message = error_of([&] { Tracer t((file / "sub").string(), 0); });
  CHECK(contains(message, file.string()));
}

TEST_CASE("tracer: opened later, paused, with compute spans and instants on their own row") {
  TempDir tmp;
  Tracer tracer("", 3);
  tracer.record(make_event(0, 0, 0));  // not recording yet: dropped
  tracer.open(tmp.path.string());
  CHECK(tracer.enabled());
  tracer.open((tmp.path / "other").string());  // already open: stays where it is
  const auto t0 = std::chrono::steady_clock::now();
  tracer.record(make_event(1, 0, 0));
  tracer.record(TraceSpan{"forward", "forward", t0, t0 + std::chrono::microseconds(250), 7, 0});
  tracer.record(TraceSpan{"bucket 0 ready", "ddp", t0, t0, 0, 4096});
  { const TraceScope scope(&tracer, "optimizer", "optimizer"); }
  tracer.set_recording(false);
  CHECK_FALSE(tracer.enabled());
  tracer.record(make_event(2, 0, 0));  // paused: dropped
  { const TraceScope scope(&tracer, "dropped", "step"); }
  tracer.flush();
  CHECK_FALSE(fs::exists(tmp.path / "other"));
  std::ifstream in(tmp.path / "trace.rank3.json");
  const json doc = json::parse(in);
  std::vector<json> steps, spans;
  bool compute_named = false;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] == "M") {
      compute_named = compute_named || (e["tid"] == kComputeLane && e["args"]["name"] == "compute");
    } else if (e["tid"] == kComputeLane) {
      spans.push_back(e);
    } else {
      steps.push_back(e);
    }
  }
  CHECK(compute_named);
  REQUIRE(steps.size() == 1);
  CHECK(steps[0]["args"]["seq"] == 1);
  REQUIRE(spans.size() == 3);
  CHECK(spans[0]["name"] == "forward");
  CHECK(spans[0]["ph"] == "X");
  CHECK(spans[0]["dur"].get<double>() == doctest::Approx(250));
  CHECK(spans[0]["args"]["index"] == 7);
  CHECK(spans[1]["ph"] == "i");
  CHECK(spans[1]["args"]["bytes"] == 4096);
  CHECK(spans[2]["name"] == "optimizer");
  CHECK(spans[2]["cat"] == "optimizer");

  // Closed: written, forgotten, and free to be opened elsewhere (a next run).
  tracer.set_recording(true);
  tracer.record(make_event(3, 0, 0));
  tracer.close();
  CHECK_FALSE(tracer.enabled());
  tracer.open((tmp.path / "next").string());
  CHECK(tracer.enabled());
  tracer.record(make_event(4, 0, 0));
  tracer.flush();
  std::size_t first = 0, next = 0;
  std::ifstream first_file(tmp.path / "trace.rank3.json");
  const json earlier = json::parse(first_file);
  for (const json& e : earlier["traceEvents"]) first += e["ph"] != "M" ? 1 : 0;
  std::ifstream next_file(tmp.path / "next" / "trace.rank3.json");
  const json later = json::parse(next_file);
  for (const json& e : later["traceEvents"]) {
    if (e["ph"] == "X") {
      ++next;
      CHECK(e["args"]["seq"] == 4);
    }
  }
  CHECK(first == 5);  // the step and 3 spans from before, and seq 3
  CHECK(next == 1);
}

TEST_CASE("merge: three rank files become one trace with a process per rank") {
  TempDir tmp;
  for (int rank = 0; rank < 3; ++rank) {
    Tracer tracer(tmp.path.string(), rank);
    for (int step = 0; step < 4; ++step) tracer.record(make_event(1, step, 0));
  }
  std::ofstream(tmp.path / "notes.txt") << "not a trace";     // ignored: other name
  std::ofstream(tmp.path / "trace.rankX.json") << "garbage";  // ignored: not a rank number
  const fs::path out = tmp.path / "merged" / "all.json";
  const std::size_t count = merge_traces(tmp.path.string(), out.string());
  const json doc = read_json(out);
  const json& events = doc.at("traceEvents");
  CHECK(count == events.size());
  CHECK(count_phase(events, "X") == 12);
  std::set<int> pids;
  std::set<std::string> names;
  for (const json& e : events) {
    pids.insert(e.at("pid").get<int>());
    if (e.at("name") == "process_name") names.insert(e.at("args").at("name").get<std::string>());
  }
  CHECK(pids == std::set<int>{0, 1, 2});
  CHECK(names == std::set<std::string>{"rank 0", "rank 1", "rank 2"});
}

TEST_CASE("merge: malformed files, empty and missing directories are errors naming them") {
  TempDir tmp;
  const std::string dir = tmp.path.string();
  const std::string out = (tmp.path / "out.json").string();
  CHECK(contains(error_of([&] { merge_traces(dir, out); }), dir));
  CHECK(contains(error_of([&] { merge_traces(dir + "/missing", out); }), dir + "/missing"));

  { Tracer(dir, 0).record(make_event(0, 0, 0)); }
  const fs::path bad = tmp.path / "trace.rank1.json";
  std::ofstream(bad) << "{\"traceEvents\": [";
  std::string message = error_of([&] { merge_traces(dir, out); });
  CHECK(contains(message, "malformed"));
  CHECK(contains(message, bad.string()));

  std::ofstream(bad) << "{\"events\": []}";
  CHECK(contains(error_of([&] { merge_traces(dir, out); }), bad.string()));

  // A file whose events belong to another rank (renamed or copied) is reported too.
  std::ofstream(bad) << R"({"traceEvents": [{"ph": "X", "pid": 0, "ts": 1, "dur": 1}]})";
  message = error_of([&] { merge_traces(dir, out); });
  CHECK(contains(message, bad.string()));
  CHECK(contains(message, "pid 0"));
  CHECK_FALSE(fs::exists(out));
}

TEST_CASE("ringlet trace merge, end to end") {
  require_ringlet_binary();
  TempDir tmp;
  const std::string dir = tmp.path.string();
  for (int rank = 0; rank < 2; ++rank) {
    Tracer tracer(dir, rank);
    for (int step = 0; step < 2; ++step) tracer.record(make_event(0, step, 0));
  }
  const std::string out = (tmp.path / "merged.json").string();

  const CommandResult help = run_ringlet("--help");
  CHECK(help.status == 0);
  CHECK(contains(help.output, "trace merge"));

  const CommandResult merge = run_ringlet("trace merge '" + dir + "' -o '" + out + "'");
  CHECK(merge.status == 0);
  CHECK(contains(merge.output, out));
  CHECK(count_phase(read_json(out).at("traceEvents"), "X") == 4);

  const CommandResult equals_form = run_ringlet("trace merge --output='" + out + "' '" + dir + "'");
  CHECK(equals_form.status == 0);

  const CommandResult typo = run_ringlet("trace merge '" + dir + "' --ouput x.json");
  CHECK(typo.status == 2);
  CHECK(contains(typo.output, "'--ouput'"));
  CHECK(contains(typo.output, "did you mean '--output'"));

  const CommandResult command = run_ringlet("trce merge");
  CHECK(command.status == 2);
  CHECK(contains(command.output, "did you mean 'trace'"));

  const CommandResult no_output = run_ringlet("trace merge '" + dir + "'");
  CHECK(no_output.status == 2);
  CHECK(contains(no_output.output, "-o"));

  const CommandResult missing = run_ringlet("trace merge '" + dir + "/nope' -o '" + out + "'");
  CHECK(missing.status == 1);
  CHECK(contains(missing.output, dir + "/nope"));
}
