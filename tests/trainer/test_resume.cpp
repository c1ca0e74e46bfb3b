// Exact resume through the `ringlet` binary, 2 ranks: a SIGTERM mid-epoch stops every rank after
// the same step, keeps it in a checkpoint that --resume continues bit for bit; a fork may change
// the lr (recorded), a resume may not; a checkpoint whose header was altered, or whose optimizer
// state holds an infinity, is refused naming the key. (test_resume_matrix.cpp: every lr schedule.)
#include <doctest/doctest.h>
#include <signal.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "temp_dir.h"
#include "training_runs.h"

using namespace ringlet::testing;
namespace fs = std::filesystem;
namespace st = ringlet::checkpoint::safetensors;

TEST_CASE("SIGTERM mid-epoch: every rank stops after one step, saved; --resume ends bit for bit") {
  const std::string recipe =
      "--nproc 2 --limit_train 4096 --limit_test 100 --threads 1 --workers 1 --log_every 1 "
      "--epochs 2 --schedule cosine --warmup_epochs 1";
  TempDir whole("ringlet_sigterm_whole"), stopped("ringlet_sigterm_stopped");
  REQUIRE(train(recipe + " --out " + quoted(whole.path)).status == 0);
  const std::size_t steps_per_epoch = read_lines(whole.path / "steps.jsonl").size() / 2;
  REQUIRE(steps_per_epoch >= 16);

  FILE* run = start_train(recipe + " --out " + quoted(stopped.path));
  REQUIRE(wait_for_lines(stopped.path / "steps.jsonl", steps_per_epoch + 3));  // into epoch 2
  const pid_t launcher = find_ringlet(stopped.path.string(), -1);
  REQUIRE(launcher > 0);
  ::kill(launcher, SIGTERM);
  CommandResult result = ringlet::testing::finish_command(run);
  INFO(result.output);
  CHECK(result.status == 128 + SIGTERM);
  CHECK(contains(result.output, "got SIGTERM; forwarding it to the workers"));
  CHECK(contains(result.output,
                 "stopped by SIGTERM: " + (stopped.path / "checkpoint.safetensors").string() +
                     " keeps epoch 2 up to batch "));
  CHECK(contains(result.output,
                 "continue with: ringlet train --out " + stopped.path.string() + " --resume"));
  const auto saved = st::read_metadata(stopped.path / "checkpoint.safetensors");
  REQUIRE(saved.count("batches") == 1);
  CHECK(std::stoi(saved.at("batches")) > 0);
  CHECK(saved.at("epoch") == "1");

  result = train("--resume --out " + quoted(stopped.path));
  INFO(result.output);
  REQUIRE(result.status == 0);
  CHECK(contains(result.output, "batch(es) of epoch 2"));
  check_same_run(stopped.path, whole.path);
}

TEST_CASE("a fork may change the lr, recorded in history.jsonl; a resume may not") {
  TempDir source("ringlet_fork_lr_source"), fork("ringlet_fork_lr"), planned("ringlet_fork_plan");
  const std::string recipe = std::string(kSmall) + " --schedule step --step_size 1 --gamma 0.5";
  REQUIRE(train(recipe + " --epochs 1 --out " + quoted(source.path)).status == 0);
  CommandResult result = train("--resume --lr 0.01 --epochs 2 --out " + quoted(source.path));
  CHECK(result.status == 2);
  CHECK(contains(result.output, "this command changes lr 0.05 -> 0.01"));
  CHECK(contains(result.output, "fork the run with --resume_from DIR --out NEW"));

  result = train("--resume_from " + quoted(source.path) + " --lr 0.01 --epochs 2 --out " +
                 quoted(fork.path));
  INFO(result.output);
  REQUIRE(result.status == 0);
  CHECK(contains(result.output,
                 "schedule: lr 0.05 -> 0.01 (a fork); epochs 2-2 follow the "
                 "schedule as a run started so would, from lr 0.005"));
  const auto history = read_lines(fork.path / "history.jsonl");
  REQUIRE(history.size() == 2);
  CHECK(history[1]["action"] == "fork");
  CHECK(history[1]["changes"]["lr"] == nlohmann::json::array({0.05, 0.01}));
  const auto metrics = read_lines(fork.path / "metrics.jsonl");
  REQUIRE(metrics.size() == 2);
  CHECK(metrics[1]["lr"].get<double>() == doctest::Approx(0.005));
}

TEST_CASE("an altered checkpoint header is refused by resume and eval, naming the key") {
  TempDir run_dir("ringlet_header_flip");
  REQUIRE(train(std::string(kSmall) + " --epochs 1 --schedule step --out " + quoted(run_dir.path))
              .status == 0);
  const fs::path file = run_dir.path / "checkpoint.safetensors";
  std::string bytes = file_text(file);
  const std::size_t at = bytes.find("\"epoch\":\"1\"");
  REQUIRE(at != std::string::npos);
  bytes[at + 9] = '2';  // epoch 1 -> 2: same length, valid JSON
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
  for (const std::string& command : {"train --resume --epochs 3 --out " + quoted(run_dir.path),
                                     "eval --checkpoint " + quoted(file)}) {
    CAPTURE(command);
    const CommandResult result = ringlet::testing::finish_command(ringlet::testing::start_command(
        "timeout 60 '" + ringlet::testing::require_ringlet_binary() + "' " + command));
    INFO(result.output);
    CHECK(result.status != 0);
    CHECK(contains(result.output, "metadata 'epoch' fails its CRC-32 check"));
  }
}

TEST_CASE("a checkpoint with an infinity in the optimizer's state is not resumed") {
  TempDir run_dir("ringlet_inf_momentum");
  REQUIRE(train(std::string(kSmall) + " --epochs 1 --momentum 0.9 --out " + quoted(run_dir.path))
              .status == 0);
  const fs::path file = run_dir.path / "checkpoint.safetensors";
  st::File saved = st::read(file);
  bool changed = false;
  for (auto& [name, tensor] : saved.tensors) {
    if (name != "optim.state.0.momentum_buffer") continue;
    tensor.data<float>()[0] = -std::numeric_limits<float>::infinity();
    changed = true;
  }
  REQUIRE(changed);
  st::write(file, saved.tensors, saved.metadata);
  const CommandResult result = train("--resume --epochs 2 --out " + quoted(run_dir.path));
  INFO(result.output);
  CHECK(result.status != 0);
  CHECK(contains(result.output,
                 "holds NaN or infinite values in optimizer state "
                 "'state.0.momentum_buffer'"));
  CHECK(contains(result.output, "--resume_from DIR --out NEW, where --lr may change"));
}
