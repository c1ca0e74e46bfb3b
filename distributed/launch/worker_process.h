// One worker process of `ringlet launch`: fork + execve of a resolved program in its own process
// group, with stdout and stderr on pipes the launcher reads. The process group lets a stop reach
// what the worker started too (a `sh -c` script's children would otherwise keep the pipes open),
// and the worker gets SIGKILL if the launcher dies first (PR_SET_PDEATHSIG), so no rank outlives
// its launcher. Not thread-safe; one launcher thread owns its workers.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace ringlet::distributed {

// Finds `name` like execvp: a name with a '/' is taken as a path, otherwise each PATH directory
// is tried in order. Throws core::ValueError naming the command when nothing executable is found.
std::string resolve_program(const std::string& name);

// "KEY=VALUE" strings: the launcher's environment with every key of `overrides` replaced.
std::vector<std::string> merged_environment(
    const std::vector<std::pair<std::string, std::string>>& overrides);

// Exit status as a shell reports it: the exit code, or 128 + the signal number.
int shell_status(int wait_status);
// "exit code 3" or "signal 9 (SIGKILL)", for error messages.
std::string describe_status(int wait_status);

class WorkerProcess {
 public:
  // Starts `program` (already resolved) with argv and a full environment ("KEY=VALUE"). Throws
  // core::Error when pipes or fork fail; a failing execve shows up as exit code 127 with a
  // message on the worker's stderr.
  WorkerProcess(int rank, const std::string& program, const std::vector<std::string>& argv,
                const std::vector<std::string>& env);
  ~WorkerProcess();  // closes the pipes; SIGKILLs and reaps the worker if it is still running
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  int rank() const { return rank_; }
  pid_t pid() const { return pid_; }
  bool running() const { return !status_.has_value(); }
  std::optional<int> wait_status() const { return status_; }  // raw waitpid status once reaped

  // Reaps the worker without blocking; returns true when it exited just now.
  bool poll_exit();
  // Sends `sig` to the worker's process group (the worker and whatever it started). No-op once
  // the worker is reaped and its pipes are closed.
  void signal(int sig);

  // Output pipes (non-blocking read ends; -1 once closed). stream 0 = stdout, 1 = stderr.
  int fd(int stream) const { return fds_[stream]; }
  void close_fd(int stream);
  bool pipes_open() const { return fds_[0] >= 0 || fds_[1] >= 0; }

 private:
  int rank_;
  pid_t pid_ = -1;
  int fds_[2] = {-1, -1};
  std::optional<int> status_;
};

// Splits a byte stream into lines. A line longer than kMaxLine is passed on in pieces, so a
// worker that never writes a newline cannot grow the launcher's memory without bound.
class LineBuffer {
 public:
  static constexpr std::size_t kMaxLine = 64 * 1024;
  template <class Emit>
  void feed(const char* data, std::size_t n, Emit&& emit) {
    for (std::size_t i = 0; i < n; ++i) {
      if (data[i] == '\n') {
        emit(partial_);
        partial_.clear();
      } else {
        partial_.push_back(data[i]);
        if (partial_.size() >= kMaxLine) {
          emit(partial_);
          partial_.clear();
        }
      }
    }
  }
  // At end of stream: a last line without its newline.
  template <class Emit>
  void finish(Emit&& emit) {
    if (!partial_.empty()) emit(partial_);
    partial_.clear();
  }

 private:
  std::string partial_;
};

}  // namespace ringlet::distributed
