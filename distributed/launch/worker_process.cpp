// Starting, signalling and reaping the worker processes of `ringlet launch`. Between fork and
// execve the child only makes async-signal-safe calls: the launcher may run threads (the store
// server), and a child of a threaded process may not allocate or take locks.
#include "distributed/launch/worker_process.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <set>

#include "core/error.h"

extern char** environ;

namespace ringlet::distributed {

namespace {

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// Writes a decimal number with write(2) only (no allocation: usable after fork).
void write_number(int fd, int value) {
  char digits[16];
  int n = 0;
  unsigned v = static_cast<unsigned>(value < 0 ? -value : value);
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0 && n < 15);
  if (value < 0) digits[n++] = '-';
  while (n > 0) (void)!::write(fd, &digits[--n], 1);
}

[[noreturn]] void exec_child(const char* program, char* const* argv, char* const* envp,
                             pid_t launcher, int out_w, int err_w) {
  ::setpgid(0, 0);
  // Die with the launcher; if it is already gone, the parent changed and we stop here.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != launcher) ::_exit(127);
  ::dup2(out_w, STDOUT_FILENO);
  ::dup2(err_w, STDERR_FILENO);
  // Nothing else of the launcher's leaks in (the store's listening socket among others).
  ::close_range(3, ~0U, 0);
  // Handlers installed by the launcher reset at exec, but an ignored SIGPIPE or a blocked mask
  // would be inherited; the worker starts with the defaults, as from a shell.
  ::signal(SIGPIPE, SIG_DFL);
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execve(program, argv, envp);
  const int error = errno;
  constexpr char kPrefix[] = "ringlet launch: cannot execute ";
  (void)!::write(STDERR_FILENO, kPrefix, sizeof kPrefix - 1);
  (void)!::write(STDERR_FILENO, program, std::strlen(program));
  constexpr char kErrno[] = " (errno ";
  (void)!::write(STDERR_FILENO, kErrno, sizeof kErrno - 1);
  write_number(STDERR_FILENO, error);
  (void)!::write(STDERR_FILENO, ")\n", 2);
  ::_exit(127);
}

}  // namespace

std::string resolve_program(const std::string& name) {
  RINGLET_CHECK(!name.empty(), ValueError, "launch: the command to run is empty");
  if (name.find('/') != std::string::npos) {
    RINGLET_CHECK(is_executable_file(name), ValueError, "launch: command '", name,
                  "' is not an executable file");
    return name;
  }
  const char* path_env = std::getenv("PATH");
  const std::string path = path_env != nullptr ? path_env : "/usr/local/bin:/usr/bin:/bin";
  std::size_t begin = 0;
  while (begin <= path.size()) {
    std::size_t end = path.find(':', begin);
    if (end == std::string::npos) end = path.size();
    const std::string dir = path.substr(begin, end - begin);
    // An empty PATH element means the current directory, as for execvp.
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (is_executable_file(candidate)) return candidate;
    begin = end + 1;
  }
  RINGLET_THROW(ValueError, "launch: command '", name, "' not found (searched PATH=", path, ")");
}

std::vector<std::string> merged_environment(
    const std::vector<std::pair<std::string, std::string>>& overrides) {
  std::set<std::string> replaced;
  for (const auto& [key, value] : overrides) replaced.insert(key);
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::size_t eq = entry.find('=');
    if (eq != std::string::npos && replaced.count(entry.substr(0, eq)) != 0) continue;
    env.push_back(entry);
  }
  for (const auto& [key, value] : overrides) env.push_back(key + "=" + value);
  return env;
}

int shell_status(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

std::string describe_status(int wait_status) {
  if (WIFEXITED(wait_status)) return core::str("exit code ", WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    const int sig = WTERMSIG(wait_status);
    const char* abbrev = ::sigabbrev_np(sig);
    return core::str("signal ", sig, abbrev != nullptr ? std::string(" (SIG") + abbrev + ")" : "");
  }
  return core::str("wait status ", wait_status);
}

WorkerProcess::WorkerProcess(int rank, const std::string& program,
                             const std::vector<std::string>& argv,
                             const std::vector<std::string>& env)
    : rank_(rank) {
  // Everything the child needs is built here, before fork.
  std::vector<char*> argv_ptrs, env_ptrs;
  for (const auto& a : argv) argv_ptrs.push_back(const_cast<char*>(a.c_str()));
  argv_ptrs.push_back(nullptr);
  for (const auto& e : env) env_ptrs.push_back(const_cast<char*>(e.c_str()));
  env_ptrs.push_back(nullptr);

  int out[2] = {-1, -1}, err[2] = {-1, -1};
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    const int error = errno;
    for (int fd : {out[0], out[1], err[0], err[1]}) {
      if (fd >= 0) ::close(fd);
    }
    RINGLET_THROW(Error, "launch: pipe for rank ", rank, " failed: ", std::strerror(error));
  }
  const pid_t launcher = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0)
    exec_child(program.c_str(), argv_ptrs.data(), env_ptrs.data(), launcher, out[1], err[1]);
  const int fork_error = errno;
  ::close(out[1]);
  ::close(err[1]);
  if (pid < 0) {
    ::close(out[0]);
    ::close(err[0]);
    RINGLET_THROW(Error, "launch: fork for rank ", rank, " failed: ", std::strerror(fork_error));
  }
  // Also set the group from this side, so a signal sent right after fork reaches it.
  ::setpgid(pid, pid);
  pid_ = pid;
  fds_[0] = out[0];
  fds_[1] = err[0];
  for (int fd : fds_) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

WorkerProcess::~WorkerProcess() {
  close_fd(0);
  close_fd(1);
  if (running() && pid_ > 0) {
    ::kill(-pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

bool WorkerProcess::poll_exit() {
  if (!running()) return false;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r != pid_) return false;
  status_ = status;
  return true;
}

void WorkerProcess::signal(int sig) {
  if (running() || pipes_open()) ::kill(-pid_, sig);
}

void WorkerProcess::close_fd(int stream) {
  if (fds_[stream] >= 0) ::close(fds_[stream]);
  fds_[stream] = -1;
}

}  // namespace ringlet::distributed
