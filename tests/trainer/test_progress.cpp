// What a training run says as it goes: every rank's step split (distributed/rank_times.h),
// the progress lines and steps.jsonl records of a log window (trainer/progress.h), and the
// straggler a window names from how long the ranks waited for each other at the gradient
// all-reduces (distributed/stragglers.h). The 2-rank run that slows one rank from outside is
// straggler_drill.py.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "distributed/rank_times.h"
#include "distributed/stragglers.h"
#include "ringlet_command.h"
#include "temp_dir.h"
#include "trainer/progress.h"

using namespace ringlet;
using ringlet::testing::contains;

namespace {

// A progress of one epoch, log windows of 2 steps, steps.jsonl written in `dir`.
trainer::Progress two_step_windows(std::ostream& out, int world, const std::filesystem::path& dir) {
  return trainer::Progress(out, {.epochs = 1,
                                 .world = world,
                                 .log_every = 2,
                                 .tty = false,
                                 .steps_file = dir / "steps.jsonl",
                                 .events = nullptr});
}

std::vector<nlohmann::json> read_windows(const std::filesystem::path& dir) {
  std::ifstream records(dir / "steps.jsonl");
  std::string line;
  std::vector<nlohmann::json> windows;
  while (std::getline(records, line)) windows.push_back(nlohmann::json::parse(line));
  return windows;
}

}  // namespace

TEST_CASE("rank times: one rank's split as is, several ranks' ranges and their slowest") {
  using ringlet::core::TimeSplit;
  const TimeSplit fast{42.64, 36.4, 0.74, 5.5, 0.67}, slow{42.76, 41.83, 0.51, 0.31, 0.65};
  const auto one =
      ringlet::distributed::gather_splits(nullptr, fast, ringlet::core::Deadline::never());
  REQUIRE(one.size() == 1);
  CHECK(one[0].computing_ms == 36.4);
  CHECK(ringlet::distributed::describe_splits(one) ==
        "a step 42.64 ms: computing 36.40 ms, preempted 0.74 ms, blocked 5.50 ms");
  CHECK(ringlet::distributed::describe_splits({fast, slow}) ==
        "a step 42.70 ms: computing 36.40-41.83 ms (rank 1 the slowest), preempted 0.51-0.74 ms, "
        "blocked 0.31-5.50 ms");
  TimeSplit unknown = slow;
  unknown.preempted_ms = std::nan("");
  CHECK(ringlet::distributed::describe_splits({fast, unknown}) ==
        "a step 42.70 ms: computing 36.40-41.83 ms (rank 1 the slowest), blocked 0.31-5.50 ms");
  const auto json = ringlet::distributed::splits_json({fast, unknown});
  REQUIRE(json.size() == 2);
  CHECK(json[1]["rank"] == 1);
  CHECK(json[1]["preempted_ms"].is_null());
  CHECK(json[0]["blocked_ms"].get<double>() == 5.5);
}

TEST_CASE("progress: a window of skipped steps has no loss, and its images still count") {
  ringlet::testing::TempDir dir("ringlet_progress_skipped");
  std::ostringstream out;
  trainer::Progress progress = two_step_windows(out, 1, dir.path);
  progress.begin_epoch(0, 4);
  for (int step = 1; step <= 4; ++step) {
    const bool skipped = step <= 2;  // the first window overflowed twice (f16)
    progress.step(
        {.step = step,
         .skipped = skipped,
         .loss = skipped ? 0.0 : 1.5,
         .examples = 8,
         .lr = 0.1,
         .grad_norm = std::nullopt,
         .loss_scale = 1024.0,
         .device = step <= 2 ? std::nullopt
                             : std::optional<device::DeviceCounts>({step == 3 ? 60u : 70u, 1, 0}),
         .waited_for_ms = {}});
  }
  INFO(out.str());
  CHECK(contains(out.str(), "step 2/4 loss - (every step skipped) lr 0.100000"));
  CHECK(contains(out.str(), "step 4/4 loss 1.5000 lr"));
  const std::vector<nlohmann::json> windows = read_windows(dir.path);
  REQUIRE(windows.size() == 2);
  CHECK(windows[0]["loss"].is_null());
  CHECK(windows[0]["skipped"] == 2);
  CHECK(windows[0]["images_per_s"].get<double>() > 0);  // 16 images went through
  CHECK(windows[1]["loss"] == 1.5);
  CHECK(windows[1]["skipped"] == 0);
  // On a device each window also says what a step queued and waited for, on average.
  CHECK(!windows[0].contains("device_per_step"));
  CHECK(windows[1]["device_per_step"]["stream_ops"] == 65.0);
  CHECK(windows[1]["device_per_step"]["host_syncs"] == 1.0);
  CHECK(windows[1]["device_per_step"]["driver_allocs"] == 0.0);
  CHECK(contains(out.str(), "| a step: 65.0 stream ops, 1.0 host syncs, 0.0 driver allocs"));
}

TEST_CASE("progress: a rank the others wait for over 20% of a step is named the straggler") {
  ringlet::testing::TempDir dir("ringlet_progress_straggler");
  std::ostringstream out;
  trainer::Progress progress = two_step_windows(out, 3, dir.path);
  progress.begin_epoch(0, 4);
  for (int step = 1; step <= 4; ++step) {
    trainer::StepSample sample;
    sample.step = step;
    sample.loss = 1.0;
    sample.examples = 8;
    // Steps of 10 ms. The first window: rank 2 kept the others waiting 3 ms a step (30%); the
    // second: rank 0, 1.9 ms (19%).
    sample.step_ms = 10.0;
    if (step == 2) sample.waited_for_ms = {0.0, 0.5, 3.0};
    if (step == 4) sample.waited_for_ms = {1.9, 0.0, 0.0};
    progress.step(sample);
  }
  const std::string said = out.str();
  INFO(said);
  CHECK(contains(said, "step 2/4 loss"));
  CHECK(contains(said,
                 "| straggler: rank 2 keeps the others waiting 3.0 ms of a 10.0 ms step "
                 "(30%)"));
  CHECK(std::count(said.begin(), said.end(), '|') == 1);  // not in the second window
  const std::vector<nlohmann::json> windows = read_windows(dir.path);
  REQUIRE(windows.size() == 2);
  CHECK(windows[0]["straggler"] == 2);
  CHECK(windows[0]["waited_for_ms"].size() == 3);
  CHECK(windows[0]["step_ms"] == 10.0);
  CHECK_FALSE(windows[1].contains("straggler"));
}

TEST_CASE("stragglers: the earliest rank's wait for each rank, from durations only") {
  CHECK_FALSE(distributed::find_straggler({}, 10.0));
  CHECK_FALSE(distributed::find_straggler({0.0, 1.9}, 10.0));  // 19%
  const auto s = distributed::find_straggler({0.0, 2.5, 1.0}, 10.0);
  REQUIRE(s);
  CHECK(s->rank == 1);
  CHECK(s->share == doctest::Approx(0.25));
  CHECK(distributed::straggler_text(*s, 10.0) ==
        "straggler: rank 1 keeps the others waiting 2.5 ms of a 10.0 ms step (25%)");
  distributed::WaitTally alone;
  alone.add(std::chrono::milliseconds(3), 10.0);
  CHECK(alone.waited_for(nullptr, ringlet::core::Deadline::after(std::chrono::seconds(1)))
            .waited_for_ms.empty());
}
