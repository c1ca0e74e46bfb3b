// Helpers of the tests that drive `ringlet train` runs to compare them: 2-rank runs on a small
// slice of Fashion-MNIST, started and finished through the binary, the processes of a run found
// by its directory, and two runs' checkpoints and records compared bit for bit.
#pragma once

#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/safetensors.h"
#include "ringlet_command.h"
#include "same_checkpoint.h"

namespace ringlet::testing {

namespace st = ringlet::checkpoint::safetensors;

inline const char* const kSmall =
    "--nproc 2 --limit_train 256 --limit_test 64 --threads 1 --workers 1 --log_every 1000";

inline std::string quoted(const std::filesystem::path& p) { return "'" + p.string() + "'"; }

inline FILE* start_train(const std::string& args) {
  return start_command("timeout 120 '" + require_ringlet_binary() + "' train " + args);
}

inline CommandResult train(const std::string& args) { return finish_command(start_train(args)); }

inline std::vector<nlohmann::json> read_lines(const std::filesystem::path& file) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

inline std::string file_text(const std::filesystem::path& file) {
  std::ifstream in(file);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A /proc file's text: what could be read of it, empty where the process is gone (a process
// that exits while its files are read makes the read fail with ESRCH).
inline std::string proc_text(const std::filesystem::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string text;
  char chunk[4096];
  for (ssize_t got; (got = ::read(fd, chunk, sizeof chunk)) > 0;) {
    text.append(chunk, static_cast<std::size_t>(got));
  }
  ::close(fd);
  return text;
}

// The pid of the process whose first argument is the ringlet binary and whose command line
// mentions `marker` (a run directory): with `rank` < 0 the launcher (no RANK in its
// environment), else that worker. -1 when there is none.
inline pid_t find_ringlet(const std::string& marker, int rank) {
  const std::string binary = ringlet_binary();
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string command = proc_text(entry.path() / "cmdline");
    const std::string env = std::string(1, '\0') + proc_text(entry.path() / "environ");
    const std::string argv0 = command.substr(0, command.find('\0'));
    if (!contains(command, marker) || (argv0 != binary && argv0 != "/proc/self/exe")) continue;
    const bool has_rank = contains(env, std::string(1, '\0') + "RANK=");
    const std::string wanted = std::string(1, '\0') + "RANK=" + std::to_string(rank) + '\0';
    if (rank < 0 ? (!has_rank && argv0 == binary) : contains(env, wanted)) {
      return static_cast<pid_t>(std::stoi(name));
    }
  }
  return -1;
}

// Whether the run directory's lock (trainer/run_lock.h) is free: no file, or a flock taken and
// given back at once.
inline bool run_lock_free(const std::filesystem::path& dir) {
  const int fd = ::open((dir / "lock").c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return true;
  const bool free = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
  ::close(fd);  // gives the flock back
  return free;
}

// Waits (up to 60 s) until no worker of ranks 0 .. ranks - 1 of the run directory `marker` names
// is left and the run's lock is free: a killed launcher's workers die of it a moment later, and a
// dying worker's command line is gone before its files (rank 0's lock among them) are closed.
inline bool wait_for_workers_gone(const std::string& marker, int ranks) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    bool any = false;
    for (int r = 0; r < ranks && !any; ++r) any = find_ringlet(marker, r) > 0;
    if (!any && run_lock_free(marker)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// Waits (up to 60 s) until `file` has at least `lines` lines.
inline bool wait_for_lines(const std::filesystem::path& file, std::size_t lines) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string text = file_text(file);
    if (static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')) >= lines) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// Every tensor, the position and the schedule's state of two runs' checkpoints are equal.
inline void check_same_run(const std::filesystem::path& a, const std::filesystem::path& b) {
  const auto ca = st::read(a / "checkpoint.safetensors");
  const auto cb = st::read(b / "checkpoint.safetensors");
  check_same_tensors(ca, cb);
  for (const auto& entry : ca.metadata) {
    const std::string& key = entry.first;  // not a structured binding: CAPTURE takes it
    if (key == "config") continue;         // names the run directory
    CAPTURE(key);
    REQUIRE(cb.metadata.count(key) == 1);
    CHECK(cb.metadata.at(key) == entry.second);
  }
  CHECK(ca.metadata.size() == cb.metadata.size());
  // The epochs' records agree too: losses, accuracy and lr (not the timings).
  const auto ma = read_lines(a / "metrics.jsonl"), mb = read_lines(b / "metrics.jsonl");
  REQUIRE(ma.size() == mb.size());
  for (std::size_t e = 0; e < ma.size(); ++e) {
    for (const char* key : {"epoch", "step", "loss", "test_loss", "accuracy", "lr"}) {
      CAPTURE(e);
      CAPTURE(key);
      CHECK(ma[e][key] == mb[e][key]);
    }
  }
}

}  // namespace ringlet::testing
