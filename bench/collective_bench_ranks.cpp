// Rank setup of the collective benchmarks. With -np N the first process is rank 0: it hosts a
// TcpStoreServer on 127.0.0.1 and re-executes /proc/self/exe for ranks 1..N-1 (its own
// arguments plus --child-rank R --store-port P --parent-pid Q); a spawned rank dies with its parent
// (PR_SET_PDEATHSIG, saying so on stderr), and an orphan sweeper removes what the job left in
// /dev/shm should rank 0 be killed. Started by a launcher (RANK/WORLD_SIZE/..., no -np) the process
// is one rank found by discover(). ChildWatcher turns a spawned rank's death into a clear error
// and gives rank 0 a few seconds to exit after it.
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "bench/collective_bench.h"
#include "core/error.h"
#include "transport/rendezvous.h"

extern char** environ;

namespace ringlet::bench {
namespace {

using namespace std::chrono_literals;

pid_t spawn_rank(const BenchOptions& o, int rank, int port) {
  // argv[0] is the binary's real path, so that ps shows what the rank is.
  char self[4096] = {0};
  const ssize_t len = ::readlink("/proc/self/exe", self, sizeof self - 1);
  std::vector<std::string> args{len > 0 ? std::string(self, len) : "/proc/self/exe"};
  args.insert(args.end(), o.args.begin(), o.args.end());
  args.insert(args.end(), {"--child-rank", std::to_string(rank), "--store-port",
                           std::to_string(port), "--parent-pid", std::to_string(::getpid())});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // Nothing of rank 0's but stdin, stdout and stderr leaks in, as for `ringlet launch`'s workers:
  // a copy of the store server's end of rank 0's own store connection kept it open after the
  // server closed it, so rank 0, failing, waited out its store deadline past the teardown limit.
  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv.data(), environ);
  ::posix_spawn_file_actions_destroy(&actions);
  RINGLET_CHECK(rc == 0, Error, "cannot start rank ", rank, " (/proc/self/exe): posix_spawn error ",
                rc);
  return pid;
}

// What a spawned rank says when rank 0 dies (its parent-death signal): prepared before, written
// from the handler with write(2) alone.
char parent_died_message[160];
std::size_t parent_died_length = 0;

extern "C" void on_parent_death(int) {
  (void)!::write(STDERR_FILENO, parent_died_message, parent_died_length);
  ::_exit(1);
}

// Die with rank 0, saying so in the same words whether it dies now or had died before this rank
// set the signal up (then this rank has another parent already).
void follow_parent(const char* program, int rank, int parent_pid) {
  parent_died_length = static_cast<std::size_t>(
      std::snprintf(parent_died_message, sizeof parent_died_message,
                    "%s (rank %d): rank 0 (pid %d), which started this rank, died; exiting\n",
                    program, rank, parent_pid));
  parent_died_length = std::min(parent_died_length, sizeof parent_died_message - 1);
  struct sigaction action {};
  action.sa_handler = on_parent_death;
  ::sigaction(SIGUSR2, &action, nullptr);
  ::prctl(PR_SET_PDEATHSIG, SIGUSR2);
  if (::getppid() != parent_pid) on_parent_death(SIGUSR2);
}

std::string describe_status(int rank, pid_t pid, int status) {
  if (WIFSIGNALED(status)) {
    return core::str("rank ", rank, " (pid ", pid, ") was killed by signal ", WTERMSIG(status));
  }
  return core::str("rank ", rank, " (pid ", pid, ") exited with status ", WEXITSTATUS(status));
}

}  // namespace

RankSetup setup_ranks(const BenchOptions& o, const char* program) {
  RankSetup s;
  const auto connect_deadline = core::Deadline::after(60s);
  if (o.child_rank >= 0) {
    follow_parent(program, o.child_rank, o.parent_pid);
    s.rank = o.child_rank;
    s.world_size = o.np;
    s.store = std::make_unique<transport::TcpStore>("127.0.0.1", o.store_port, connect_deadline);
    return s;
  }
  if (o.np > 0 || !transport::launched_as_rank()) {
    s.world_size = o.np > 0 ? o.np : 1;
    s.server = std::make_unique<transport::TcpStoreServer>("127.0.0.1", 0);
    const int port = s.server->port();
    s.store = std::make_unique<transport::TcpStore>("127.0.0.1", port, connect_deadline);
    s.sweeper = std::make_unique<distributed::OrphanSweeper>();
    s.sweeper->watch(::getpid(), /*leads_group=*/false);
    for (int r = 1; r < s.world_size; ++r) {
      s.children.push_back(spawn_rank(o, r, port));
      s.sweeper->watch(s.children.back(), /*leads_group=*/false);
    }
    return s;
  }
  const transport::InitInfo info = transport::discover({});
  s.rank = info.rank;
  s.world_size = info.world_size;
  s.store_host = info.master_addr.empty() ? "127.0.0.1" : info.master_addr;
  s.store = transport::open_store(info, connect_deadline);
  return s;
}

struct ChildWatcher::State {
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<pid_t> children;
  std::vector<bool> running;
  std::function<void(const std::string&)> on_failure;
  std::string failure;
  bool stop = false;
  std::thread thread;

  bool all_exited() const {
    for (bool r : running) {
      if (r) return false;
    }
    return true;
  }

  // Once a rank has failed, rank 0 has this long to abort, clean up and exit by itself; past
  // it, whatever it still waits on (a set-up step, a thread join) is not worth the job's time.
  static constexpr auto kTeardownLimit = 5s;
  std::chrono::steady_clock::time_point failed_at{};
  bool failure_killed = false;  // `failure` is a rank killed by a signal

  // The first failure is told at once (on_failure). A rank killed by a signal that is reaped
  // later replaces, in `failure`, one that merely exited non-zero: the exits follow the death.
  void record_failure(std::size_t i, int status, std::unique_lock<std::mutex>& lock) {
    const bool killed = WIFSIGNALED(status);
    const std::string text = describe_status(static_cast<int>(i) + 1, children[i], status);
    if (!failure.empty()) {
      if (killed && !failure_killed) {
        failure = text;
        failure_killed = true;
        cv.notify_all();
      }
      return;
    }
    failure = text;
    failure_killed = killed;
    failed_at = std::chrono::steady_clock::now();
    cv.notify_all();
    auto notify = on_failure;
    lock.unlock();
    if (notify) notify(text);
    lock.lock();
  }

  // Rank 0 outlived kTeardownLimit after a rank's failure: says so, kills the other ranks and
  // exits (the orphan sweeper removes what the job left in /dev/shm).
  [[noreturn]] void give_up() {
    std::fprintf(stderr, "rank 0: still running %lld s after %s; exiting\n",
                 static_cast<long long>(kTeardownLimit.count()), failure.c_str());
    for (std::size_t i = 0; i < children.size(); ++i) {
      if (running[i]) ::kill(children[i], SIGKILL);
    }
    ::_exit(1);
  }

  // Polls every child (WNOHANG) until told to stop, or all have exited and none failed.
  void watch() {
    std::unique_lock lock(mutex);
    while (!stop && (!all_exited() || !failure.empty())) {
      if (!failure.empty() && std::chrono::steady_clock::now() - failed_at > kTeardownLimit) {
        give_up();
      }
      for (std::size_t i = 0; i < children.size(); ++i) {
        if (!running[i]) continue;
        int status = 0;
        if (::waitpid(children[i], &status, WNOHANG) != children[i]) continue;
        running[i] = false;
        cv.notify_all();
        const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (!ok) record_failure(i, status, lock);
      }
      cv.wait_for(lock, 50ms);
    }
  }
};

ChildWatcher::ChildWatcher(std::vector<pid_t> children,
                           std::function<void(const std::string&)> on_failure)
    : state_(std::make_shared<State>()) {
  state_->children = std::move(children);
  state_->running.assign(state_->children.size(), true);
  state_->on_failure = std::move(on_failure);
  state_->thread = std::thread([s = state_] { s->watch(); });
}

ChildWatcher::~ChildWatcher() {
  {
    std::lock_guard lock(state_->mutex);
    state_->stop = true;
    state_->cv.notify_all();
  }
  state_->thread.join();
  for (std::size_t i = 0; i < state_->children.size(); ++i) {
    if (!state_->running[i]) continue;
    ::kill(state_->children[i], SIGKILL);
    int status = 0;
    ::waitpid(state_->children[i], &status, 0);
  }
}

std::string ChildWatcher::wait_all(double seconds) {
  std::unique_lock lock(state_->mutex);
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  state_->cv.wait_until(lock, until, [&] { return state_->all_exited(); });
  if (!state_->failure.empty()) return state_->failure;
  for (std::size_t i = 0; i < state_->children.size(); ++i) {
    if (state_->running[i]) {
      return core::str("rank ", i + 1, " (pid ", state_->children[i], ") still running after ",
                       seconds, " s");
    }
  }
  return "";
}

std::string ChildWatcher::failure() const {
  std::lock_guard lock(state_->mutex);
  return state_->failure;
}

std::string ChildWatcher::failure_within(double seconds) const {
  std::unique_lock lock(state_->mutex);
  // A rank that exited non-zero may have followed one killed by a signal not reaped yet: the
  // killed one, if any, is the one to name, so wait for it or for every rank to be reaped.
  state_->cv.wait_for(lock, std::chrono::duration<double>(seconds), [&] {
    return !state_->failure.empty() && (state_->failure_killed || state_->all_exited());
  });
  return state_->failure;
}

}  // namespace ringlet::bench
