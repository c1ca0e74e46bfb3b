// `ringlet report` and `ringlet trace report` through the binary, and the trace of a training
// run. A hand-made trace of two ranks (three all-reduces of 1 MiB, 64 KiB and 4 KiB steps,
// the fastest of each size exactly alpha 20 us + bytes / 1 GB/s, rank 1 waiting 100 us twice)
// gives known numbers: the fitted model, each step's GB/s and ratio, where the time went; the
// model from p2p_perf lines too. A hand-made run directory (records, a torn last line, a
// recipe with markup in it) gives a page with every chart, both timelines, no script and
// nothing fetched. A real 2-rank run with --trace_steps 2 traces exactly two steps: forward,
// backward and its autograd nodes, DDP's bucket-ready instants, the optimizer and the
// all-reduce steps, and nothing after them. Bad input (not a run, a malformed record, unknown
// collective, --p2p without --transport) is an error that says so.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "collectives/trace.h"
#include "collectives/trace_analysis.h"
#include "ringlet_command.h"
#include "temp_dir.h"

using namespace ringlet;
using ringlet::testing::CommandResult;
using ringlet::testing::contains;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

CommandResult run_ringlet(const std::string& args) {
  return ringlet::testing::finish_command(ringlet::testing::start_command(
      "timeout 120 '" + ringlet::testing::require_ringlet_binary() + "' " + args));
}

Clock::time_point at_us(double us) {
  return Clock::time_point(std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double, std::micro>(1e6 + us)));
}

constexpr double kAlpha = 20.0;                                        // us
double model_us(std::uint64_t bytes) { return kAlpha + bytes / 1e3; }  // beta 1 GB/s

// seq 0: 1 MiB steps at t=0; seq 1: 64 KiB at 10 ms; seq 2: 4 KiB at 20 ms. Rank 1 waits
// 100 us more in seq 0's RS step and seq 1's AG step. Plus one training step's compute spans.
void write_trace(const fs::path& dir) {
  const std::uint64_t sizes[] = {1 << 20, 64 << 10, 4 << 10};
  for (int rank = 0; rank < 2; ++rank) {
    collectives::Tracer tracer(dir.string(), rank);
    for (std::uint64_t seq = 0; seq < 3; ++seq) {
      double t = 10000.0 * static_cast<double>(seq);
      for (int step = 0; step < 2; ++step) {
        const bool waits = rank == 1 && ((seq == 0 && step == 0) || (seq == 1 && step == 1));
        const double dur = model_us(sizes[seq]) + (waits ? 100 : 0);
        tracer.record(collectives::TraceEvent{"all_reduce", seq, step, step == 0 ? "RS" : "AG",
                                              (rank + 1 - step + 2) % 2, 1 - rank, 0, sizes[seq],
                                              at_us(t), at_us(t + dur)});
        t += dur;
      }
    }
    const auto span = [&](const char* name, const char* cat, double a, double b, int index) {
      tracer.record(collectives::TraceSpan{name, cat, at_us(a), at_us(b), index, 0});
    };
    span("step", "step", 0, 30000, 1);
    span("forward", "forward", 0, 5000, -1);
    span("backward", "backward", 5000, 15000, -1);
    span("LinearBackward", "backward", 5100, 9000, -1);
    span("bucket 0 ready", "ddp", 9000, 9000, 0);
    span("optimizer", "optimizer", 25000, 29000, -1);
  }
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// A run directory as `ringlet train` leaves it, two epochs in, traced.
void write_run(const fs::path& run) {
  fs::create_directories(run);
  write_text(run / "config.json",
             R"({"model": "fmnist_cnn", "dataset": "fashion-mnist", "nproc": 2, "epochs": 3,
                 "lr": 0.05, "batch_size": 64, "optimizer": "sgd", "device": "cpu",
                 "out": "runs/<b>x</b>"})");
  write_text(
      run / "metrics.jsonl",
      R"({"epoch": 1, "step": 4, "loss": 0.9, "test_loss": 0.7, "accuracy": 0.80, "lr": 0.05, "images_per_s": 900, "seconds": 1.5}
{"epoch": 2, "step": 8, "loss": 0.6, "test_loss": 0.5, "accuracy": 0.85, "lr": 0.05, "images_per_s": 950, "seconds": 1.4, "ranks": [{"rank": 0, "wall_ms": 42.64, "computing_ms": 36.4, "preempted_ms": 0.74, "blocked_ms": 5.5, "other_threads_ms": 0.67}, {"rank": 1, "wall_ms": 42.65, "computing_ms": 41.83, "preempted_ms": null, "blocked_ms": 0.31, "other_threads_ms": 0.65}]}
)");
  write_text(run / "steps.jsonl",
             R"({"epoch": 1, "step": 2, "loss": 1.2, "lr": 0.05, "images_per_s": 800}
{"epoch": 1, "step": 4, "loss": 0.8, "lr": 0.05, "images_per_s": 900}
{"epoch": 2, "step": 6, "loss": 0.7, "lr": 0.05, "images_per_s": 940}
{"epoch": 2, "step": 8, "loss": null, "lr": 0.05, "images_per_s": 960}
{"epoch": 3, "step": 9, "lo)");  // torn: being written
  write_text(
      run / "history.jsonl",
      R"({"time": "2026-11-24T10:00:00+0000", "action": "new", "from_epoch": 0, "command": "ringlet train --nproc 2"}
)");
  write_trace(run / "trace");
}

std::size_t count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("the alpha-beta model: fitted through the fastest step of each size, or from p2p_perf") {
  testing::TempDir tmp("ringlet_report");
  write_trace(tmp.path);
  const auto steps = collectives::step_records(collectives::load_traces(tmp.path.string(), "t"));
  REQUIRE(steps.size() == 12);
  const collectives::AlphaBeta fitted = collectives::fit_alpha_beta(steps);
  CHECK(fitted.alpha_us == doctest::Approx(kAlpha).epsilon(1e-6));
  CHECK(fitted.beta_gbps == doctest::Approx(1.0).epsilon(1e-6));
  const auto all = collectives::group_collectives(steps);
  REQUIRE(all.size() == 3);
  const auto& biggest = collectives::pick_collective(all, -1);
  CHECK(biggest.seq == 0);
  CHECK(biggest.rank_bytes == 2u << 20);
  const collectives::TimeSplit t = collectives::split_time(biggest, fitted);
  CHECK(t.alpha_us == doctest::Approx(4 * kAlpha));
  CHECK(t.bytes_us == doctest::Approx(4 * (1 << 20) / 1e3));
  CHECK(t.beyond_us == doctest::Approx(100).epsilon(1e-6));
  // One size only: alpha and beta cannot be separated, and the model says so.
  std::vector<collectives::StepRecord> one_size;
  for (const auto& s : steps) {
    if (s.seq == 2) one_size.push_back(s);
  }
  const collectives::AlphaBeta flat = collectives::fit_alpha_beta(one_size);
  CHECK(flat.alpha_us == 0);
  CHECK(contains(flat.source, "cannot be told apart"));

  const fs::path p2p = tmp.path / "p2p.jsonl";
  write_text(
      p2p,
      "# p2p_perf\n"
      R"({"bench":"p2p_perf","transport":"shm","nsocks":1,"test":"latency","bytes":4,"us":5.0,"gbps":0.001}
{"bench":"p2p_perf","transport":"shm","nsocks":1,"test":"latency","bytes":64,"us":6.0,"gbps":0.01}
{"bench":"p2p_perf","transport":"shm","nsocks":1,"test":"bandwidth","bytes":1048576,"us":400,"gbps":2.5}
{"bench":"p2p_perf","transport":"shm","nsocks":1,"test":"bandwidth","bytes":16777216,"us":5000,"gbps":3.0}
{"bench":"p2p_perf","transport":"tcp","nsocks":1,"test":"bandwidth","bytes":16777216,"us":5000,"gbps":9.0}
)");
  const collectives::AlphaBeta measured = collectives::alpha_beta_from_p2p(p2p.string(), "shm");
  CHECK(measured.alpha_us == 5.0);
  CHECK(measured.beta_gbps == 3.0);
  CHECK_THROWS_WITH(collectives::alpha_beta_from_p2p(p2p.string(), "rdma"),
                    doctest::Contains("no p2p_perf latency and bandwidth lines for transport"));
}

TEST_CASE("ringlet trace report: each step next to the model, and where the time went") {
  testing::TempDir tmp("ringlet_report");
  write_trace(tmp.path);
  const std::string dir = "'" + tmp.path.string() + "'";
  CommandResult r = run_ringlet("trace report " + dir);
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(contains(r.output, "2 rank(s), 3 collective(s) (3 all_reduce), 12 steps"));
  CHECK(contains(r.output, "alpha 20.0 us, beta 1.00 GB/s"));
  CHECK(contains(r.output, "fitted through the fastest step of each of 3 message sizes"));
  // seq 0 has the most bytes: 2 MiB per rank, wall 2237.2 us, model 2137.2 us.
  CHECK(std::regex_search(
      r.output, std::regex(R"(\n +0  all_reduce +2 +4 +2\.0 MiB +2237\.2 +2137\.2 +1\.05\n)")));
  CHECK(contains(r.output, "all_reduce seq 0 (the most bytes per rank"));
  CHECK(contains(r.output, "n-1 = 1 RS and n-1 = 1 AG step(s) per channel, 2(n-1) = 2"));
  // rank 1's RS step waited 100 us: 1168.6 us, 0.90 GB/s, 1.09 x the model.
  CHECK(std::regex_search(
      r.output, std::regex(R"(\n +1 +0 +0 RS +0 +0 +1\.0 MiB +1168\.6 +0\.90 +1068\.6 +1\.09\n)")));
  CHECK(std::regex_search(r.output, std::regex(R"(alpha: 4 steps x 20\.0 us +80\.0 us +1\.8%)")));
  CHECK(std::regex_search(
      r.output, std::regex(R"(bytes / beta: 4\.0 MiB at 1\.00 GB/s +4194\.3 us +95\.9%)")));
  CHECK(std::regex_search(
      r.output, std::regex(R"(beyond the model: waiting on peers, reducing +100\.0 us +2\.3%)")));

  r = run_ringlet("trace report " + dir + " --seq 2 --limit 1");
  CHECK(r.status == 0);
  CHECK(contains(r.output, "the first 1 of 3; --limit N"));
  CHECK(contains(r.output, "all_reduce seq 2, each step"));

  const fs::path p2p = tmp.path / "p2p.jsonl";
  write_text(
      p2p,
      R"({"bench":"p2p_perf","transport":"tcp","nsocks":1,"test":"latency","bytes":4,"us":30.0,"gbps":0.001}
{"bench":"p2p_perf","transport":"tcp","nsocks":1,"test":"bandwidth","bytes":16777216,"us":5000,"gbps":2.0}
)");
  r = run_ringlet("trace report " + dir + " --p2p '" + p2p.string() + "' --transport tcp");
  CHECK(r.status == 0);
  CHECK(contains(r.output, "alpha 30.0 us, beta 2.00 GB/s"));
  CHECK(contains(r.output, "p2p_perf on tcp"));

  r = run_ringlet("trace report " + dir + " --seq 7");
  CHECK(r.status == 1);
  CHECK(contains(r.output, "no collective numbered 7 in the trace (it holds 0 .. 2)"));
  r = run_ringlet("trace report " + dir + " --p2p '" + p2p.string() + "'");
  CHECK(r.status == 2);
  CHECK(contains(r.output, "--p2p needs --transport"));
  r = run_ringlet("trace report " + dir + " --limit 0");
  CHECK(r.status == 2);
  CHECK(contains(r.output, "--limit must be an integer in [1, 1000000], got '0'"));
  r = run_ringlet("trace report '" + (tmp.path / "none").string() + "'");
  CHECK(r.status == 1);
  CHECK(contains(r.output, "is not a directory"));
  // A field of the wrong type is named, with its file and event.
  const fs::path odd = tmp.path / "odd";
  fs::create_directories(odd);
  write_text(odd / "trace.rank0.json",
             R"({"traceEvents": [{"ph": "X", "pid": 0, "tid": "channel", "ts": 1, "dur": 2}]})");
  r = run_ringlet("trace report '" + odd.string() + "'");
  CHECK(r.status == 1);
  CHECK(
      contains(r.output, "trace.rank0.json': event 0's \"tid\" is \"channel\", of the wrong type"));
  r = run_ringlet("trace report --help");
  CHECK(r.status == 0);
  CHECK(contains(r.output, "usage: ringlet trace report DIR"));
}

TEST_CASE("ringlet report: one self-contained page with curves, recipe, history and the trace") {
  testing::TempDir tmp("ringlet_report");
  const fs::path run = tmp.path / "run";
  write_run(run);
  CommandResult r = run_ringlet("report '" + run.string() + "'");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(contains(r.output, "report.html: 2 epoch record(s), 4 step record(s), 2 rank(s) traced"));
  const std::string html = read_text(run / "report.html");
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(count(html, "<svg") == 6);  // loss, accuracy, lr, throughput, step and ring timelines
  // Self-contained: no script, nothing linked or fetched; "http" only in the SVG namespace.
  CHECK(count(html, "<script") == 0);
  CHECK(count(html, "src=") == 0);
  CHECK(count(html, "href=") == 0);
  CHECK(count(html, "http") == count(html, "http://www.w3.org/2000/svg"));
  // The logged loss: 3 points (the null loss is left out) of the torn file's 4 whole records.
  std::smatch m;
  REQUIRE(std::regex_search(html, m, std::regex("stroke='#1f77b4' points='([^']*)'")));
  CHECK(count(m[1].str(), ",") == 3);
  CHECK(contains(html, "test accuracy 0.8500 (best 0.8500)"));
  CHECK(contains(html, "2 of 3 epoch(s) done"));
  CHECK(contains(html, "<td class='key'>lr</td>"));
  CHECK(contains(html, "runs/&lt;b&gt;x&lt;/b&gt;"));  // the recipe's text, escaped
  CHECK(contains(html, "ringlet train --nproc 2"));    // the history
  // Where each rank's step went in the last epoch; a run queue's wait not known shows "-".
  CHECK(contains(html, "<h2>Ranks</h2>"));
  CHECK(contains(html,
                 "<th>step</th><th>= computing</th><th>+ preempted</th><th>+ blocked</th>"
                 "<th>other threads' CPU (not in the sum)</th>"));
  CHECK(contains(html, "so with several running at once on several cores it can exceed the step"));
  CHECK(contains(html,
                 "<tr><td>0</td><td>42.64</td><td>36.40</td><td>0.74</td><td>5.50</td>"
                 "<td>0.67</td></tr>"));
  CHECK(contains(html, "<tr><td>1</td><td>42.65</td><td>41.83</td><td>-</td><td>0.31</td>"));
  CHECK(contains(html, "training step 1 on every rank"));
  CHECK(contains(html, "bucket 0 ready"));
  CHECK(contains(html, "LinearBackward"));
  CHECK(contains(html, "all_reduce seq 0: each step on each rank"));
  CHECK(contains(html, "beyond the model (waiting on peers, reducing) 100.0"));

  r = run_ringlet("report '" + run.string() + "' -o '" + (tmp.path / "elsewhere.html").string() +
                  "'");
  CHECK(r.status == 0);
  CHECK(fs::exists(tmp.path / "elsewhere.html"));

  // Not traced (a stray copy of a trace file is no trace): the page says how to trace.
  fs::remove_all(run / "trace");
  fs::create_directories(run / "trace");
  write_text(run / "trace" / "trace.rank0.json.bak", "{}");
  r = run_ringlet("report '" + run.string() + "'");
  CHECK(r.status == 0);
  CHECK(contains(r.output, "not traced"));
  CHECK(contains(read_text(run / "report.html"), "Train with <code>--trace_steps N</code>"));
}

TEST_CASE("ringlet report of a short run: points, not lines; nothing on the frame; a note") {
  testing::TempDir tmp("ringlet_report");
  const fs::path run = tmp.path / "run";
  write_run(run);
  // One epoch of a short run: two logged steps, one epoch record.
  write_text(
      run / "metrics.jsonl",
      R"({"epoch": 1, "step": 62, "loss": 0.9, "test_loss": 0.7, "accuracy": 0.80, "lr": 0.05, "images_per_s": 900, "seconds": 1.5}
)");
  write_text(run / "steps.jsonl",
             R"({"epoch": 1, "step": 50, "loss": 1.2, "lr": 0.05, "images_per_s": 800}
{"epoch": 1, "step": 62, "loss": 0.8, "lr": 0.05, "images_per_s": 900}
)");
  const CommandResult r = run_ringlet("report '" + run.string() + "'");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const std::string html = read_text(run / "report.html");
  CHECK(contains(html, "A short run: 2 logged step(s) and 1 epoch(s), drawn as points"));
  CHECK(contains(html, "only 2 logged steps"));
  CHECK(contains(html, "only 1 epoch<"));
  // Every point has its marker (2 steps x 3 step series + 4 epoch points), none on the frame:
  // the plot area is x in (62, 444), y in (30, 216).
  const std::regex circle("<circle cx='([0-9.]+)' cy='([0-9.]+)'");
  int markers = 0;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), circle);
       it != std::sregex_iterator(); ++it) {
    const double x = std::stod((*it)[1].str()), y = std::stod((*it)[2].str());
    CAPTURE(x);
    CAPTURE(y);
    CHECK(x > 62.5);
    CHECK(x < 443.5);
    CHECK(y > 30.5);
    CHECK(y < 215.5);
    ++markers;
  }
  CHECK(markers == 10);
}

TEST_CASE("ringlet report: bad input says what and where") {
  testing::TempDir tmp("ringlet_report");
  CommandResult r = run_ringlet("report '" + tmp.path.string() + "'");
  CHECK(r.status == 1);
  CHECK(contains(r.output, "is not a run directory (it has no config.json"));
  write_run(tmp.path / "run");
  write_text(tmp.path / "run" / "metrics.jsonl", "{\"epoch\": 1}\nnot json\n");
  r = run_ringlet("report '" + (tmp.path / "run").string() + "'");
  CHECK(r.status == 1);
  CHECK(contains(r.output, "metrics.jsonl:2: not a JSON record: not json"));
  r = run_ringlet("report");
  CHECK(r.status == 2);
  CHECK(contains(r.output, "missing the run directory"));
  r = run_ringlet("report a b");
  CHECK(r.status == 2);
  r = run_ringlet("report --ouput x run");
  CHECK(r.status == 2);
  CHECK(contains(r.output, "did you mean '--output'"));
}

TEST_CASE("--trace_steps 2 on 2 ranks: compute spans next to the all-reduce steps, then nothing") {
  testing::TempDir tmp("ringlet_report");
  const fs::path run = tmp.path / "run";
  CommandResult r = run_ringlet(
      "train --nproc 2 --epochs 1 --limit_train 512 --limit_test 64 --batch_size 32 "
      "--threads 1 --workers 1 --log_every 1000 --trace_steps 2 --out '" +
      run.string() + "'");
  INFO(r.output);
  REQUIRE(r.status == 0);
  for (int rank = 0; rank < 2; ++rank) {
    const auto trace = nlohmann::json::parse(
        read_text(run / "trace" / ("trace.rank" + std::to_string(rank) + ".json")));
    std::set<std::string> names;
    std::vector<double> step_ends;
    bool node = false, bucket = false;
    double last_all_reduce = 0;
    for (const auto& e : trace["traceEvents"]) {
      const std::string name = e.value("name", ""), ph = e.value("ph", "");
      if (ph == "M") continue;
      if (e["tid"] == collectives::kComputeLane) {
        names.insert(name);
        if (name == "step") step_ends.push_back(e["ts"].get<double>() + e["dur"].get<double>());
        node = node || (e.value("cat", "") == "backward" && name.size() > 8 &&
                        name.substr(name.size() - 8) == "Backward");
        bucket = bucket || (ph == "i" && name == "bucket 0 ready");
      } else if (e["args"]["op"] == "all_reduce") {
        last_all_reduce = std::max(last_all_reduce, e["ts"].get<double>() + e["dur"].get<double>());
      }
    }
    INFO("rank ", rank);
    CHECK(step_ends.size() == 2);
    for (const char* name : {"data", "forward", "backward", "gradient sync wait", "optimizer"}) {
      CHECK_MESSAGE(names.count(name) == 1, name);
    }
    CHECK(node);
    CHECK(bucket);
    REQUIRE(last_all_reduce > 0);
    CHECK(last_all_reduce <= *std::max_element(step_ends.begin(), step_ends.end()));
  }
  // Each epoch's line and record say where every rank's step went: the two ranks' steps are as
  // long as each other (lockstep), each within them computing and blocked. Only their first
  // steps differ, by how much earlier one rank began the epoch (tens of ms on a loaded machine),
  // spread here over 8 steps.
  const std::regex epoch_line(
      "epoch 1/1: train loss .*; a step [0-9.]+ ms: computing [0-9.]+-[0-9.]+ ms \\(rank [01] "
      "the slowest\\)(, preempted [0-9.]+-[0-9.]+ ms)?, blocked [0-9.]+-[0-9.]+ ms");
  CHECK(std::regex_search(r.output, epoch_line));
  const auto record = nlohmann::json::parse(read_text(run / "metrics.jsonl"));
  REQUIRE(record["ranks"].size() == 2);
  const auto& ranks = record["ranks"];
  CHECK(ranks[0]["wall_ms"].get<double>() ==
        doctest::Approx(ranks[1]["wall_ms"].get<double>()).epsilon(0.15));
  for (const auto& rank : ranks) {
    CHECK(rank["computing_ms"].get<double>() > 0);
    CHECK(rank["computing_ms"].get<double>() <= rank["wall_ms"].get<double>() + 0.05);
    CHECK(rank["blocked_ms"].get<double>() >= -0.05);
    CHECK(rank["other_threads_ms"].get<double>() > 0);  // the communicator's and the loader's
  }
  r = run_ringlet("report '" + run.string() + "'");
  CHECK(r.status == 0);
  CHECK(contains(read_text(run / "report.html"), "training step 2 on every rank"));
  CHECK(contains(read_text(run / "report.html"), "<h2>Ranks</h2>"));
  r = run_ringlet("trace report '" + (run / "trace").string() + "'");
  CHECK(r.status == 0);
  CHECK(contains(r.output, "2 rank(s)"));

  // One rank: compute spans only; trace report says there is nothing of the ring to show.
  const fs::path single = tmp.path / "single";
  r = run_ringlet(
      "train --nproc 1 --epochs 1 --limit_train 64 --limit_test 32 --batch_size 32 "
      "--threads 1 --workers 1 --trace_steps 1 --out '" +
      single.string() + "'");
  REQUIRE(r.status == 0);
  r = run_ringlet("trace report '" + (single / "trace").string() + "'");
  CHECK(r.status == 1);
  CHECK(contains(r.output, "hold no collective steps"));
}
