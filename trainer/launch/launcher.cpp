// The launcher's control loop: host the store (node 0), agree on a job token with the other
// nodes, start the workers, then one poll() loop over their output pipes and a self-pipe fed by
// the SIGINT/SIGTERM handler, reaping exits every kPollMs. The first failure (or a forwarded
// signal) stops everyone: SIGTERM to each worker's process group, SIGKILL after stop_grace.
#include "trainer/launch/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>
#include <thread>

#include "core/deadline.h"
#include "core/error.h"
#include "core/random.h"
#include "trainer/launch/worker_process.h"
#include "transport/rendezvous.h"
#include "transport/tcp_store.h"

namespace ringlet::trainer {

namespace {

using core::Deadline;
using Env = std::vector<std::pair<std::string, std::string>>;

constexpr int kPollMs = 100;            // bounds every wait of the loop (reaping, deadlines)
constexpr std::size_t kTailLines = 20;  // stderr lines kept per quiet rank for its failure
constexpr auto kDrain = std::chrono::seconds(2);  // output still arriving after the last exit
// How long node 0 keeps the store up after its own workers exit, for ranks elsewhere that are
// still finishing (single node: the workers are gone, so the store is idle at once).
constexpr auto kStoreLinger = std::chrono::seconds(30);
constexpr char kTokenKey[] = "ringlet/launch/token";
constexpr char kJoinedKey[] = "ringlet/launch/joined";

// The write end of the self-pipe: the one piece of process-wide state, because a signal
// handler can reach nothing else.
std::atomic<int> g_signal_fd{-1};

extern "C" void forward_signal_handler(int sig) {
  const int saved = errno;
  const int fd = g_signal_fd.load();
  const unsigned char byte = static_cast<unsigned char>(sig);
  if (fd >= 0) (void)!::write(fd, &byte, 1);
  errno = saved;
}

// SIGINT/SIGTERM handlers that write the signal number to a pipe the poll loop watches,
// installed for one attempt and restored afterwards.
class SignalPipe {
 public:
  SignalPipe() {
    RINGLET_CHECK(::pipe2(fds_, O_CLOEXEC | O_NONBLOCK) == 0, Error,
                  "launch: pipe failed: ", std::strerror(errno));
    int expected = -1;
    if (!g_signal_fd.compare_exchange_strong(expected, fds_[1])) {
      ::close(fds_[0]);
      ::close(fds_[1]);
      RINGLET_THROW(Error, "launch: another launch() is already running in this process");
    }
    struct sigaction action {};
    action.sa_handler = forward_signal_handler;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGINT, &action, &old_int_);
    ::sigaction(SIGTERM, &action, &old_term_);
  }
  ~SignalPipe() {
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
    g_signal_fd.store(-1);
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  SignalPipe(const SignalPipe&) = delete;
  SignalPipe& operator=(const SignalPipe&) = delete;

  int fd() const { return fds_[0]; }
  std::vector<int> drain() {
    std::vector<int> signals;
    unsigned char buffer[64];
    ssize_t n;
    while ((n = ::read(fds_[0], buffer, sizeof buffer)) > 0)
      signals.insert(signals.end(), buffer, buffer + n);
    return signals;
  }

 private:
  int fds_[2] = {-1, -1};
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

struct AttemptResult {
  int status = 0;        // 0, the failing worker's shell status, or 128 + the forwarded signal
  int failed_rank = -1;  // the first worker that failed on its own, -1 if none
  int wait_status = 0;   // the failing worker's raw waitpid status
  int interrupt = 0;     // the signal the launcher got, 0 if none
};

std::string signal_name(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : core::str("signal ", sig);
}

AttemptResult run_attempt(const LaunchOptions& o, const std::string& program,
                          const std::vector<std::string>& command, const Env& common,
                          std::ostream& out, std::ostream& err) {
  SignalPipe signals;
  const int n = o.nproc_per_node;
  // Started ones are killed and reaped by their destructors if a later start throws.
  std::vector<std::unique_ptr<WorkerProcess>> workers;
  for (int local = 0; local < n; ++local) {
    const int rank = o.node_rank * n + local;
    Env env = common;
    env.emplace_back("RANK", std::to_string(rank));
    env.emplace_back("LOCAL_RANK", std::to_string(local));
    workers.push_back(
        std::make_unique<WorkerProcess>(rank, program, command, merged_environment(env)));
  }
  std::vector<std::array<LineBuffer, 2>> lines(n);
  std::vector<std::deque<std::string>> tails(n);
  const auto emit = [&](int local, int stream) {
    return [&, local, stream](const std::string& line) {
      const int rank = workers[local]->rank();
      if (o.quiet_others && rank != 0) {
        if (stream == 1) {
          tails[local].push_back(line);
          if (tails[local].size() > kTailLines) tails[local].pop_front();
        }
        return;
      }
      (stream == 0 ? out : err) << "[rank " << rank << "] " << line << '\n';
    };
  };

  AttemptResult result;
  std::optional<Deadline> kill_at;  // set once stopping has begun
  bool killed = false;
  std::optional<Deadline> drain_until;
  const auto stop_all = [&](int sig) {
    for (auto& w : workers) w->signal(sig);
    if (!kill_at) kill_at = Deadline::after(o.stop_grace);
  };

  std::vector<char> buffer(64 * 1024);
  while (true) {
    std::vector<pollfd> fds{{signals.fd(), POLLIN, 0}};
    std::vector<std::pair<int, int>> owners{{-1, -1}};  // (local rank, stream) per fds entry
    for (int i = 0; i < n; ++i) {
      for (int s = 0; s < 2; ++s) {
        if (workers[i]->fd(s) < 0) continue;
        fds.push_back({workers[i]->fd(s), POLLIN, 0});
        owners.emplace_back(i, s);
      }
    }
    const int ready = ::poll(fds.data(), fds.size(), kPollMs);
    RINGLET_CHECK(ready >= 0 || errno == EINTR, Error,
                  "launch: poll failed: ", std::strerror(errno));
    if (ready > 0 && fds[0].revents != 0) {
      for (const int sig : signals.drain()) {
        if (result.interrupt == 0) {
          result.interrupt = sig;
          err << "ringlet launch: got " << signal_name(sig) << "; forwarding it to the workers\n";
          stop_all(sig);
        } else if (!killed) {  // a second signal: the user does not want to wait
          err << "ringlet launch: got " << signal_name(sig) << " again; killing the workers\n";
          stop_all(SIGKILL);
          killed = true;
        }
      }
    }
    for (std::size_t k = 1; ready > 0 && k < fds.size(); ++k) {
      if (fds[k].revents == 0) continue;
      const auto [i, s] = owners[k];
      const ssize_t got = ::read(fds[k].fd, buffer.data(), buffer.size());
      if (got > 0) {
        lines[i][s].feed(buffer.data(), static_cast<std::size_t>(got), emit(i, s));
      } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
        lines[i][s].finish(emit(i, s));
        workers[i]->close_fd(s);
      }
    }
    out.flush();
    err.flush();

    for (auto& w : workers) {
      if (!w->poll_exit()) continue;
      const int status = *w->wait_status();
      if (shell_status(status) == 0 || kill_at) continue;  // a stopped worker is no news
      result.failed_rank = w->rank();
      result.status = shell_status(status);
      result.wait_status = status;
      err << "ringlet launch: rank " << w->rank() << " (pid " << w->pid() << ") failed with "
          << describe_status(status);
      if (n > 1) err << "; stopping the other " << n - 1 << " worker(s)";
      err << "\n";
      stop_all(SIGTERM);
    }
    bool any_running = false, any_open = false;
    for (auto& w : workers) {
      any_running = any_running || w->running();
      any_open = any_open || w->pipes_open();
    }
    if (kill_at && !killed && any_running && kill_at->expired()) {
      err << "ringlet launch: worker(s) still running " << o.stop_grace.count()
          << " ms after the stop signal; sending SIGKILL\n";
      stop_all(SIGKILL);
      killed = true;
    }
    if (any_running) continue;
    if (!any_open) break;
    // Every worker exited but something it started still holds a pipe: read for a moment more.
    if (!drain_until) drain_until = Deadline::after(kDrain);
    if (drain_until->expired()) {
      if (kill_at) stop_all(SIGKILL);  // a stopped job's leftovers go too
      break;
    }
  }
  for (int i = 0; i < n; ++i) {
    for (int s = 0; s < 2; ++s) lines[i][s].finish(emit(i, s));
  }
  if (result.failed_rank > 0 && o.quiet_others) {
    const int local = result.failed_rank - o.node_rank * n;
    if (!tails[local].empty())
      err << "ringlet launch: last stderr lines of rank " << result.failed_rank << ":\n";
    for (const auto& line : tails[local])
      err << "[rank " << result.failed_rank << "] " << line << '\n';
  }
  if (result.failed_rank < 0 && result.interrupt != 0) result.status = 128 + result.interrupt;
  out.flush();
  err.flush();
  return result;
}

std::string draw_token() {
  char text[24];
  std::snprintf(text, sizeof text, "0x%016llx",
                static_cast<unsigned long long>(core::random_u64()));
  return text;
}

// Node 0 publishes the token and waits until every other node's launcher has read it; the others
// read it. Single node: just a fresh token.
std::string agree_on_token(const LaunchOptions& o, int port) {
  if (o.nnodes == 1) return draw_token();
  const Deadline deadline = Deadline::after(o.rdzv_timeout);
  const std::string where = core::str(o.master_addr, ":", port);
  if (o.node_rank != 0) {
    try {
      transport::TcpStore store(o.master_addr, port, deadline);
      std::string token = store.get(kTokenKey, deadline);
      store.add(kJoinedKey, 1);
      return token;
    } catch (const core::TimeoutError& e) {
      RINGLET_THROW(TimeoutError, "launch: node ", o.node_rank, " found no launcher of node 0 at ",
                    where, " within ", o.rdzv_timeout.count(), " s: ", e.what());
    }
  }
  transport::TcpStore store(o.master_addr, port, deadline);
  const std::string token = draw_token();
  store.set(kTokenKey, token);
  std::int64_t joined = 0;
  while ((joined = store.add(kJoinedKey, 0)) < o.nnodes - 1) {
    RINGLET_CHECK(!deadline.expired(), TimeoutError, "launch: only ", joined, " of the ",
                  o.nnodes - 1, " other node(s) joined at ", where, " within ",
                  o.rdzv_timeout.count(), " s");
    std::this_thread::sleep_for(std::chrono::milliseconds(kPollMs));
  }
  return token;
}

void validate(const LaunchOptions& o, const std::vector<std::string>& command) {
  RINGLET_CHECK(!command.empty(), ValueError, "launch: no command to run");
  RINGLET_CHECK(o.nproc_per_node >= 1, ValueError, "launch: nproc_per_node must be >= 1, got ",
                o.nproc_per_node);
  RINGLET_CHECK(o.nnodes >= 1, ValueError, "launch: nnodes must be >= 1, got ", o.nnodes);
  RINGLET_CHECK(o.node_rank >= 0 && o.node_rank < o.nnodes, ValueError, "launch: node_rank ",
                o.node_rank, " is outside [0, ", o.nnodes, ")");
  RINGLET_CHECK(o.master_port >= 0 && o.master_port <= 65535, ValueError, "launch: master_port ",
                o.master_port, " is outside [0, 65535]");
  RINGLET_CHECK(o.max_restarts >= 0, ValueError, "launch: max_restarts must be >= 0, got ",
                o.max_restarts);
  RINGLET_CHECK(o.nnodes == 1 || o.master_port != 0, ValueError,
                "launch: with nnodes > 1 every node needs the same explicit master_port");
  RINGLET_CHECK(o.nnodes == 1 || o.max_restarts == 0, ValueError,
                "launch: max_restarts with nnodes > 1 is not supported yet");
}

}  // namespace

int launch(const LaunchOptions& options, const std::vector<std::string>& command, std::ostream& out,
           std::ostream& err) {
  validate(options, command);
  const std::string program = resolve_program(command[0]);
  const int world_size = options.nnodes * options.nproc_per_node;
  for (int attempt = 0;; ++attempt) {
    // A fresh store per attempt: no keys left over from the failed one, and with master_port 0
    // a new port, so a straggler of the old attempt cannot reach the new one.
    std::unique_ptr<transport::TcpStoreServer> server;
    if (options.node_rank == 0)
      server = transport::host_tcp_store(options.master_addr, options.master_port);
    const int port = server ? server->port() : options.master_port;
    const Env common = {
        {"WORLD_SIZE", std::to_string(world_size)},
        {"LOCAL_WORLD_SIZE", std::to_string(options.nproc_per_node)},
        {"GROUP_RANK", std::to_string(options.node_rank)},
        {"MASTER_ADDR", options.master_addr},
        {"MASTER_PORT", std::to_string(port)},
        {"RINGLET_JOB_TOKEN", agree_on_token(options, port)},
        {"RINGLET_STORE_HOSTED", "1"},
        {"RINGLET_RESTART_COUNT", std::to_string(attempt)},
        {"RINGLET_MAX_RESTARTS", std::to_string(options.max_restarts)},
        {"RINGLET_RDZV_TIMEOUT", std::to_string(options.rdzv_timeout.count())},
    };
    const AttemptResult result = run_attempt(options, program, command, common, out, err);
    if (server && !server->wait_until_idle(Deadline::after(kStoreLinger))) {
      err << "ringlet launch: store clients still connected " << kStoreLinger.count()
          << " s after the workers exited; closing the store\n";
    }
    server.reset();
    if (result.failed_rank < 0) return result.status;
    if (attempt < options.max_restarts) {
      err << "ringlet launch: restarting all " << options.nproc_per_node << " workers (restart "
          << attempt + 1 << " of " << options.max_restarts << ")\n";
      continue;
    }
    err << "ringlet launch: error: rank " << result.failed_rank << " failed with "
        << describe_status(result.wait_status);
    if (options.max_restarts > 0) err << " after " << options.max_restarts << " restart(s)";
    err << "\n";
    err.flush();
    return result.status;
  }
}

}  // namespace ringlet::trainer
