// The run directory through the `ringlet` binary: a resume takes the run's recipe and records
// what it changed without rewriting the run's record on failure; a used directory needs
// --resume or --reset; a second job on a directory fails at once naming the holder, and a dead
// job's lock is taken over; a cosine run given more epochs follows the new horizon; a fork
// leaves its source alone; and a SIGKILL at any moment leaves a run that --resume finishes
// bit for bit like an undisturbed one.
#include <doctest/doctest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/safetensors.h"
#include "core/file_io.h"
#include "ringlet_command.h"
#include "same_checkpoint.h"
#include "temp_dir.h"

using namespace ringlet;
using ringlet::testing::CommandResult;
using ringlet::testing::contains;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

const char* const kSmall =
    "--limit_train 256 --limit_test 100 --threads 1 --workers 1 --log_every 1000";

std::string quoted(const fs::path& p) { return "'" + p.string() + "'"; }

CommandResult ringlet_train(const std::string& args) {
  return ringlet::testing::finish_command(ringlet::testing::start_command(
      "timeout 120 '" + ringlet::testing::require_ringlet_binary() + "' train " + args));
}

// Every line of a JSON-lines file, parsed.
std::vector<nlohmann::json> read_lines(const fs::path& file) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

nlohmann::json read_json(const fs::path& file) {
  std::ifstream in(file);
  return nlohmann::json::parse(in);
}

std::vector<int> epochs_of(const fs::path& run) {
  std::vector<int> epochs;
  for (const auto& record : read_lines(run / "metrics.jsonl")) epochs.push_back(record["epoch"]);
  return epochs;
}

// Every tensor of two checkpoints is equal, bit for bit, and so are the steps taken.
void check_same_checkpoint(const fs::path& a, const fs::path& b) {
  const auto ca = checkpoint::safetensors::read(a / "checkpoint.safetensors");
  const auto cb = checkpoint::safetensors::read(b / "checkpoint.safetensors");
  ringlet::testing::check_same_tensors(ca, cb);
  CHECK(ca.metadata.at("epoch") == cb.metadata.at("epoch"));
  CHECK(ca.metadata.at("step") == cb.metadata.at("step"));
}

}  // namespace

TEST_CASE("--resume takes the run's recipe, says what it changed and keeps every invocation") {
  ringlet::testing::TempDir dir("ringlet_rundir_resume");
  const std::string out = " --out " + quoted(dir.path);
  CommandResult result =
      ringlet_train(std::string(kSmall) + " --optimizer adam --lr 0.001 --epochs 1" + out);
  REQUIRE(result.status == 0);
  // No recipe keys on the command line: the run's (adam, lr 0.001, its limits) continue.
  result = ringlet_train("--resume --epochs 2" + out);
  INFO(result.output);
  REQUIRE(result.status == 0);
  CHECK(contains(result.output, "resume: epochs 1 -> 2 (the rest of the recipe is the run's)"));
  auto config = read_json(dir.path / "config.json");
  CHECK(config["optimizer"] == "adam");
  CHECK(config["lr"] == 0.001);
  CHECK(config["limit_train"] == 256);
  CHECK(config["epochs"] == 2);
  CHECK(epochs_of(dir.path) == std::vector<int>{1, 2});

  // A recipe change is refused, naming each key, and the run's record is left as it was.
  const std::string config_before = core::read_file_text(dir.path / "config.json");
  const std::string history_before = core::read_file_text(dir.path / "history.jsonl");
  result = ringlet_train("--resume --epochs 3 --optimizer sgd --lr 0.1" + out);
  CHECK(result.status == 2);
  CHECK(contains(result.output,
                 "this command changes lr 0.001 -> 0.1, optimizer \"adam\" -> \"sgd\""));
  result = ringlet_train("--resume --epochs 1" + out);
  CHECK(result.status == 2);
  CHECK(contains(result.output, "the run has finished 2 epochs; --epochs 1 would end before them"));
  CHECK(core::read_file_text(dir.path / "config.json") == config_before);
  CHECK(core::read_file_text(dir.path / "history.jsonl") == history_before);

  const auto history = read_lines(dir.path / "history.jsonl");
  REQUIRE(history.size() == 2);
  CHECK(history[0]["action"] == "new");
  CHECK(history[0]["from_epoch"] == 0);
  CHECK(history[1]["action"] == "resume");
  CHECK(history[1]["from_epoch"] == 1);
  CHECK(history[1]["changes"] == nlohmann::json{{"epochs", {1, 2}}});
  CHECK(history[1]["command"].dump().find("--resume") != std::string::npos);
  CHECK(contains(history[1]["holder"].get<std::string>(), "pid "));
}

TEST_CASE("a used run directory needs --resume or --reset; --reset keeps the history") {
  ringlet::testing::TempDir dir("ringlet_rundir_used");
  const std::string run = std::string(kSmall) + " --epochs 1 --out " + quoted(dir.path);
  REQUIRE(ringlet_train(run).status == 0);
  const std::string metrics = core::read_file_text(dir.path / "metrics.jsonl");
  CommandResult result = ringlet_train(run);
  CHECK(result.status == 2);
  CHECK(contains(result.output, "already holds a run (checkpoint.safetensors, metrics.jsonl"));
  CHECK(contains(result.output, "events.out.tfevents."));
  CHECK(contains(result.output, "): pass --resume to continue it, --reset to discard it"));
  CHECK(core::read_file_text(dir.path / "metrics.jsonl") == metrics);
  result = ringlet_train(run + " --reset");
  CHECK(result.status == 0);
  CHECK(epochs_of(dir.path) == std::vector<int>{1});
  const auto history = read_lines(dir.path / "history.jsonl");
  REQUIRE(history.size() == 2);
  CHECK(history[1]["action"] == "reset");
  // The old run's TensorBoard file went with it: one run, one curve.
  int event_files = 0;
  for (const auto& entry : fs::directory_iterator(dir.path))
    event_files += entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0;
  CHECK(event_files == 1);

  SUBCASE("a run killed in its first epoch left only steps and events: still a run") {
    fs::remove(dir.path / "checkpoint.safetensors");
    fs::remove(dir.path / "metrics.jsonl");
    result = ringlet_train(run);
    CHECK(result.status == 2);
    CHECK(contains(result.output, "already holds a run ("));
    CHECK(contains(result.output, "events.out.tfevents."));
  }
}

TEST_CASE(
    "a second job on a run directory fails at once naming the holder; a dead job's lock "
    "is taken over") {
  ringlet::testing::TempDir dir("ringlet_rundir_lock");
  const fs::path lock = dir.path / "lock";
  const std::string run =
      "--limit_train 4096 --limit_test 100 --threads 1 --workers 1 "
      "--log_every 1000 --epochs 2 --out " +
      quoted(dir.path);
  FILE* first = ringlet::testing::start_command(
      "timeout 120 '" + ringlet::testing::require_ringlet_binary() + "' train " + run);
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  std::string holder;
  while (Clock::now() < deadline && holder.empty()) {
    holder = core::read_file_text(lock);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  REQUIRE(!holder.empty());
  holder.pop_back();  // its newline
  const auto start = Clock::now();
  CommandResult result = ringlet_train(run);
  INFO(result.output);
  CHECK(result.status == 1);
  CHECK(Clock::now() - start < std::chrono::seconds(5));
  CHECK(
      contains(result.output, "is in use by another job (" + holder + "; " + lock.string() + ")"));
  const CommandResult first_run = ringlet::testing::finish_command(first);
  INFO(first_run.output);
  CHECK(first_run.status == 0);
  CHECK(epochs_of(dir.path) == std::vector<int>{1, 2});  // the first job's alone
  CHECK(core::read_file_text(lock).empty());             // released at its end

  // A lock file naming a job that is gone: taken over, and said.
  const std::string dead = "pid 999999 on host elsewhere since 2026-01-01 00:00:00";
  core::write_file_atomically(lock, dead + "\n");
  result = ringlet_train("--resume --epochs 3 --out " + quoted(dir.path));
  CHECK(result.status == 0);
  CHECK(contains(result.output,
                 "the job that held it (" + dead + ") is gone; its lock is taken over"));
  CHECK(epochs_of(dir.path) == std::vector<int>{1, 2, 3});
}

TEST_CASE("a cosine run resumed with more epochs follows the new horizon, as if planned so") {
  ringlet::testing::TempDir short_run("ringlet_rundir_cos1"), planned("ringlet_rundir_cos3");
  const std::string recipe = std::string(kSmall) + " --schedule cosine";
  REQUIRE(ringlet_train(recipe + " --epochs 1 --out " + quoted(short_run.path)).status == 0);
  REQUIRE(ringlet_train(recipe + " --epochs 3 --out " + quoted(planned.path)).status == 0);
  const CommandResult result = ringlet_train("--resume --epochs 3 --out " + quoted(short_run.path));
  INFO(result.output);
  REQUIRE(result.status == 0);
  CHECK(contains(result.output,
                 "schedule: the cosine horizon moves from 1 to 3 epochs; epochs 2-3 "
                 "follow the 3-epoch curve, from lr 0.0375"));
  const auto resumed = read_lines(short_run.path / "metrics.jsonl");
  const auto whole = read_lines(planned.path / "metrics.jsonl");
  REQUIRE(resumed.size() == 3);
  REQUIRE(whole.size() == 3);
  for (std::size_t e = 0; e < 3; ++e) CHECK(resumed[e]["lr"] == whole[e]["lr"]);
  CHECK(resumed[1]["lr"].get<double>() > 0.03);  // not the finished curve's 0
  check_same_checkpoint(short_run.path, planned.path);
}

TEST_CASE("a fork (--resume_from) continues a run in a new directory and leaves the source alone") {
  ringlet::testing::TempDir source("ringlet_rundir_src"), fork("ringlet_rundir_fork"),
      whole("ringlet_rundir_whole");
  REQUIRE(ringlet_train(std::string(kSmall) + " --epochs 1 --out " + quoted(source.path)).status ==
          0);
  REQUIRE(ringlet_train(std::string(kSmall) + " --epochs 2 --out " + quoted(whole.path)).status ==
          0);
  const std::string source_checkpoint =
      core::read_file_text(source.path / "checkpoint.safetensors");
  CommandResult result = ringlet_train("--resume_from " + quoted(source.path) +
                                       " --epochs 2 --out " + quoted(fork.path));
  INFO(result.output);
  REQUIRE(result.status == 0);
  CHECK(core::read_file_text(source.path / "checkpoint.safetensors") == source_checkpoint);
  CHECK(epochs_of(source.path) == std::vector<int>{1});
  CHECK(epochs_of(fork.path) == std::vector<int>{1, 2});
  const auto history = read_lines(fork.path / "history.jsonl");
  REQUIRE(history.size() == 2);  // the source's start, then the fork
  CHECK(history[1]["action"] == "fork");
  CHECK(history[1]["source"] == source.path.string());
  check_same_checkpoint(fork.path, whole.path);
  // A fork needs a new directory.
  result = ringlet_train("--resume_from " + quoted(source.path) + " --epochs 3 --out " +
                         quoted(source.path));
  CHECK(result.status == 2);
  CHECK(contains(result.output, "needs --out naming a new run directory"));
  result = ringlet_train("--resume_from " + quoted(source.path) + " --epochs 3 --out " +
                         quoted(fork.path));
  CHECK(result.status == 2);
  CHECK(contains(result.output, "already holds a run"));
}

TEST_CASE("a SIGKILL at any moment leaves a run that --resume finishes bit for bit") {
  ringlet::testing::TempDir whole("ringlet_rundir_undisturbed");
  const std::string recipe = std::string(kSmall) + " --limit_train 1024 --epochs 3";
  const auto start = Clock::now();
  REQUIRE(ringlet_train(recipe + " --out " + quoted(whole.path)).status == 0);
  const double run_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  // Kill times spread over an undisturbed run's length: before the first write, before the
  // first checkpoint, between a metrics line and its checkpoint, during a checkpoint write,
  // near the end.
  int from_checkpoint = 0;
  for (const double fraction : {0.02, 0.1, 0.3, 0.45, 0.6, 0.7, 0.8, 0.9, 1.0}) {
    const int ms = static_cast<int>(fraction * run_ms);
    CAPTURE(ms);
    ringlet::testing::TempDir dir("ringlet_rundir_kill");
    const CommandResult result = ringlet::testing::finish_command(
        ringlet::testing::start_command("timeout -s KILL " + std::to_string(ms / 1000.0) + " '" +
                                        ringlet::testing::require_ringlet_binary() + "' train " +
                                        recipe + " --out " + quoted(dir.path)));
    INFO(result.output);
    // Killed, or finished before the kill: --resume completes the run, once it has a record
    // (killed before its first write, there is none, and a new run starts there).
    const bool started = fs::exists(dir.path / "history.jsonl");
    CAPTURE(started);
    const CommandResult resumed_run =
        ringlet_train((started ? "--resume --out " : recipe + " --out ") + quoted(dir.path));
    INFO(resumed_run.output);
    REQUIRE(resumed_run.status == 0);
    from_checkpoint += contains(resumed_run.output, "resumed from ") ? 1 : 0;
    CHECK(epochs_of(dir.path) == std::vector<int>{1, 2, 3});
    check_same_checkpoint(dir.path, whole.path);
  }
  // Timed kills land where the machine's load puts them (a loaded run may not reach its first
  // checkpoint in any): one more kill, as soon as the first checkpoint is there, falls between
  // two checkpoints whatever the load.
  {
    ringlet::testing::TempDir dir("ringlet_rundir_kill_mid");
    const std::string checkpoint = quoted(dir.path / "checkpoint.safetensors");
    const CommandResult killed = ringlet::testing::finish_command(ringlet::testing::start_command(
        "'" + ringlet::testing::require_ringlet_binary() + "' train " + recipe + " --out " +
        quoted(dir.path) + " > /dev/null 2>&1 & pid=$!; n=0; while [ ! -f " + checkpoint +
        " ] && [ $n -lt 1200 ]; do sleep 0.05; n=$((n + 1)); done; kill -KILL $pid; wait $pid"));
    CHECK(killed.status == 128 + SIGKILL);
    const CommandResult resumed_run = ringlet_train("--resume --out " + quoted(dir.path));
    INFO(resumed_run.output);
    REQUIRE(resumed_run.status == 0);
    from_checkpoint += contains(resumed_run.output, "resumed from ") ? 1 : 0;
    CHECK(epochs_of(dir.path) == std::vector<int>{1, 2, 3});
    check_same_checkpoint(dir.path, whole.path);
  }
  CHECK(from_checkpoint >= 1);  // some kills fell between two checkpoints
}

TEST_CASE("the temporary file of a write a kill interrupted is removed by the next run") {
  ringlet::testing::TempDir dir("ringlet_rundir_temporaries");
  const std::string out = " --out " + quoted(dir.path);
  CommandResult result = ringlet_train(std::string(kSmall) + " --epochs 1" + out);
  REQUIRE(result.status == 0);
  // What a checkpoint writer killed before its rename leaves, and two files that only look
  // alike (not a temporary's name), which stay.
  const fs::path torn = dir.path / ".checkpoint.safetensors.tmp.4242.0";
  core::write_file_atomically(torn, "torn");
  const fs::path notes = dir.path / ".notes.tmp.mine";
  const fs::path plain = dir.path / "checkpoint.safetensors.tmp.1.2";
  core::write_file_atomically(notes, "mine");
  core::write_file_atomically(plain, "mine");
  result = ringlet_train(std::string(kSmall) + " --resume --epochs 2" + out);
  INFO(result.output);
  CHECK(result.status == 0);
  CHECK(contains(result.output,
                 "removed 1 temporary file(s) of a write that was interrupted "
                 "(.checkpoint.safetensors.tmp.4242.0)"));
  CHECK(!fs::exists(torn));
  CHECK(fs::exists(notes));
  CHECK(fs::exists(plain));
  CHECK(epochs_of(dir.path) == std::vector<int>{1, 2});
}
