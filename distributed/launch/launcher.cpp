// The launcher's control loop: host the store (node 0), agree on a job token with the other
// nodes, start the workers, then one poll() loop over their output pipes and a self-pipe fed by
// the SIGINT/SIGTERM/SIGUSR1 handler, reaping exits every kPollMs. The first failure stops
// everyone: SIGTERM to each worker's process group, SIGKILL after stop_grace. A signal is
// forwarded as it came, SIGKILL following after signal_grace (a `ringlet train` worker saves a
// checkpoint at its next step) or at a second signal.
#include "distributed/launch/launcher.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <memory>
#include <optional>
#include <thread>

#include "collectives/options.h"
#include "core/deadline.h"
#include "core/env.h"
#include "core/error.h"
#include "core/random.h"
#include "distributed/launch/orphan_sweeper.h"
#include "distributed/launch/worker_logs.h"
#include "distributed/launch/worker_process.h"
#include "transport/rendezvous.h"
#include "transport/shared_objects.h"
#include "transport/tcp_store.h"

namespace ringlet::distributed {

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
constexpr char kJobPortKey[] = "ringlet/launch/master_port";

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

// SIGINT/SIGTERM/SIGUSR1 handlers that write the signal number to a pipe the poll loop watches,
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
    ::sigaction(SIGUSR1, &action, &old_usr1_);
  }
  ~SignalPipe() {
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
    ::sigaction(SIGUSR1, &old_usr1_, nullptr);
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
  struct sigaction old_usr1_ {};
};

struct AttemptResult {
  int status = 0;           // 0, the failing worker's shell status, or 128 + the forwarded signal
  int failed_rank = -1;     // the first worker that failed on its own, -1 if none
  std::string failure;      // what the failing worker did: "failed with signal 9 (SIGKILL)", ...
  int interrupt = 0;        // the signal the launcher got, 0 if none
  std::vector<pid_t> pids;  // the attempt's workers, all exited and reaped by finish()
};

std::string signal_name(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : core::str("signal ", sig);
}

// One attempt of the job: this node's workers from start to exit, their output relayed line by
// line with a rank prefix, the first failure or a forwarded signal stopping everyone.
class Attempt {
 public:
  Attempt(const LaunchOptions& o, WorkerLogs& logs, std::ostream& out, std::ostream& err)
      : o_(o), n_(o.nproc_per_node), out_(out), err_(err), logs_(logs), lines_(n_), tails_(n_) {}

  // Started ones are killed and reaped by their destructors if a later start throws. Each is
  // watched by the sweeper as soon as it exists.
  void start(const std::string& program, const std::vector<std::string>& command, const Env& common,
             OrphanSweeper& sweeper) {
    for (int local = 0; local < n_; ++local) {
      const int rank = o_.node_rank * n_ + local;
      Env env = common;
      env.emplace_back("RANK", std::to_string(rank));
      env.emplace_back("ROLE_RANK", std::to_string(rank));
      env.emplace_back("LOCAL_RANK", std::to_string(local));
      workers_.push_back(
          std::make_unique<WorkerProcess>(rank, program, command, merged_environment(env)));
      sweeper.watch(workers_.back()->pid(), /*leads_group=*/true);
    }
  }

  std::vector<pid_t> pids() const {
    std::vector<pid_t> out;
    for (const auto& w : workers_) out.push_back(w->pid());
    return out;
  }

  // One round of the loop (at most kPollMs): signals, output, exits, escalation. False once
  // every worker has exited and its pipes are drained (or the drain gave up).
  bool step() {
    poll_once();
    reap_exits();
    bool any_running = false, any_open = false;
    for (auto& w : workers_) {
      any_running = any_running || w->running();
      any_open = any_open || w->pipes_open();
    }
    if (!kill_at_ && any_running && exit_by_ && exit_by_->expired()) stop_stragglers();
    if (kill_at_ && !killed_ && any_running && kill_at_->expired()) {
      err_ << "ringlet launch: worker(s) still running " << o_.stop_grace.count()
           << " ms after the stop signal; sending SIGKILL\n";
      stop_all(SIGKILL);
      killed_ = true;
    }
    if (any_running) return true;
    if (!any_open) return false;
    // Every worker exited but something it started still holds a pipe: read for a moment more.
    if (!drain_until_) drain_until_ = Deadline::after(kDrain);
    if (!drain_until_->expired()) return true;
    if (kill_at_) stop_all(SIGKILL);  // a stopped job's leftovers go too
    return false;
  }

  // Flushes the last partial lines, shows a quiet failed rank's stderr tail, sets the status.
  AttemptResult finish() {
    for (int i = 0; i < n_; ++i) {
      for (int s = 0; s < 2; ++s) lines_[i][s].finish(Emitter{this, i, s});
    }
    if (result_.failed_rank > 0 && o_.quiet_others) {
      const int local = result_.failed_rank - o_.node_rank * n_;
      if (!tails_[local].empty())
        err_ << "ringlet launch: last stderr lines of rank " << result_.failed_rank << ":\n";
      for (const auto& line : tails_[local])
        err_ << "[rank " << result_.failed_rank << "] " << line << '\n';
    }
    if (result_.failed_rank < 0 && result_.interrupt != 0) {
      result_.status = 128 + result_.interrupt;
    }
    if (result_.failed_rank >= 0 && !missing_module_.empty() && !o_.python.empty()) {
      err_ << "ringlet launch: " << o_.python << " has no module '" << missing_module_
           << "'; run the workers with another python (RINGLET_PYTHON=/path/to/python, or "
              "torchrun's PYTHON_EXEC), or install it for this one\n";
    }
    result_.pids = pids();
    out_.flush();
    err_.flush();
    return result_;
  }

 private:
  // Rank 0 and, without quiet_others, every rank: "[rank r] line" on out (stdout) or err
  // (stderr). Quiet ranks' stderr lines are kept (the last kTailLines) for their failure.
  void emit(int local, int stream, const std::string& line) {
    const int rank = workers_[local]->rank();
    note_missing_module(line);
    logs_.write(local, stream, line);
    if (!logs_.shown(stream)) return;
    if (o_.quiet_others && rank != 0) {
      if (stream == 1) {
        tails_[local].push_back(line);
        if (tails_[local].size() > kTailLines) tails_[local].pop_front();
      }
      return;
    }
    (stream == 0 ? out_ : err_) << "[rank " << rank << "] " << line << '\n';
  }
  // A python worker's "ModuleNotFoundError: No module named 'torch'": the first module named.
  void note_missing_module(const std::string& line) {
    static const std::string kMarker = "ModuleNotFoundError: No module named '";
    const std::size_t at = line.find(kMarker);
    if (!missing_module_.empty() || at == std::string::npos) return;
    const std::size_t begin = at + kMarker.size();
    missing_module_ = line.substr(begin, line.find('\'', begin) - begin);
  }

  struct Emitter {  // one worker stream's lines, for LineBuffer
    Attempt* attempt;
    int local, stream;
    void operator()(const std::string& line) const { attempt->emit(local, stream, line); }
  };

  void stop_all(int sig) { stop_all(sig, o_.stop_grace); }
  void stop_all(int sig, std::chrono::milliseconds grace) {
    for (auto& w : workers_) w->signal(sig);
    if (!kill_at_) kill_at_ = Deadline::after(grace);
  }

  // Waits up to kPollMs for a signal or worker output, then handles what arrived.
  void poll_once() {
    std::vector<pollfd> fds{{signals_.fd(), POLLIN, 0}};
    std::vector<std::pair<int, int>> owners{{-1, -1}};  // (local rank, stream) per fds entry
    for (int i = 0; i < n_; ++i) {
      for (int s = 0; s < 2; ++s) {
        if (workers_[i]->fd(s) < 0) continue;
        fds.push_back({workers_[i]->fd(s), POLLIN, 0});
        owners.emplace_back(i, s);
      }
    }
    const int ready = ::poll(fds.data(), fds.size(), kPollMs);
    RINGLET_CHECK(ready >= 0 || errno == EINTR, Error,
                  "launch: poll failed: ", std::strerror(errno));
    if (ready > 0 && fds[0].revents != 0) forward_signals();
    for (std::size_t k = 1; ready > 0 && k < fds.size(); ++k) {
      if (fds[k].revents != 0) read_output(fds[k].fd, owners[k].first, owners[k].second);
    }
    out_.flush();
    err_.flush();
    logs_.flush();
  }

  // The first signal goes to the workers; a second one means the user does not want to wait.
  void forward_signals() {
    for (const int sig : signals_.drain()) {
      if (result_.interrupt == 0) {
        result_.interrupt = sig;
        err_ << "ringlet launch: got " << signal_name(sig)
             << "; forwarding it to the workers (SIGKILL in " << o_.signal_grace.count() / 1000
             << " s, or at a second signal)\n";
        stop_all(sig, o_.signal_grace);
      } else if (!killed_) {
        err_ << "ringlet launch: got " << signal_name(sig) << " again; killing the workers\n";
        stop_all(SIGKILL);
        killed_ = true;
      }
    }
  }

  void read_output(int fd, int local, int stream) {
    const ssize_t got = ::read(fd, buffer_.data(), buffer_.size());
    if (got > 0) {
      lines_[local][stream].feed(buffer_.data(), static_cast<std::size_t>(got),
                                 Emitter{this, local, stream});
    } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
      lines_[local][stream].finish(Emitter{this, local, stream});
      workers_[local]->close_fd(stream);
    }
  }

  // The first worker that fails on its own stops the others; exits after a stop are no news.
  // The first that succeeds starts the others' exit deadline.
  void reap_exits() {
    for (auto& w : workers_) {
      if (!w->poll_exit()) continue;
      const int status = *w->wait_status();
      if (shell_status(status) == 0 && !exit_by_) {
        exit_by_ = Deadline::after(o_.exit_timeout);
        first_done_ = w->rank();
      }
      if (shell_status(status) == 0 || kill_at_) continue;
      result_.failed_rank = w->rank();
      result_.status = shell_status(status);
      result_.failure = "failed with " + describe_status(status);
      err_ << "ringlet launch: rank " << w->rank() << " (pid " << w->pid() << ") failed with "
           << describe_status(status);
      if (n_ > 1) err_ << "; stopping the other " << n_ - 1 << " worker(s)";
      err_ << "\n";
      stop_all(SIGTERM);
    }
  }

  // Workers still running exit_timeout after one succeeded: the first of them is the failure.
  void stop_stragglers() {
    for (auto& w : workers_) {
      if (!w->running()) continue;
      if (result_.failed_rank < 0) {
        result_.failed_rank = w->rank();
        result_.status = 1;
        result_.failure = core::str("did not exit within ", o_.exit_timeout.count(), " ms of rank ",
                                    first_done_, "'s success");
      }
      err_ << "ringlet launch: rank " << w->rank() << " (pid " << w->pid() << ") is still running "
           << o_.exit_timeout.count() << " ms after rank " << first_done_
           << " exited successfully (stopped, or waiting for a peer that is gone); stopping it\n";
    }
    stop_all(SIGTERM);
  }

  const LaunchOptions& o_;
  const int n_;  // workers on this node
  std::ostream& out_;
  std::ostream& err_;
  WorkerLogs& logs_;
  SignalPipe signals_;  // before the workers, which are destroyed (killed, reaped) first
  std::vector<std::unique_ptr<WorkerProcess>> workers_;
  std::vector<std::array<LineBuffer, 2>> lines_;  // per worker: stdout, stderr
  std::vector<std::deque<std::string>> tails_;    // per quiet worker: its last stderr lines
  std::vector<char> buffer_ = std::vector<char>(64 * 1024);
  AttemptResult result_;
  std::optional<Deadline> kill_at_;  // set once stopping has begun
  std::optional<Deadline> exit_by_;  // set once a worker has exited 0
  int first_done_ = -1;              // that worker's rank
  std::string missing_module_;       // the first module a python worker could not import
  bool killed_ = false;              // SIGKILL sent
  std::optional<Deadline> drain_until_;
};

AttemptResult run_attempt(const LaunchOptions& o, WorkerLogs& logs, const std::string& program,
                          const std::vector<std::string>& command, const Env& common,
                          OrphanSweeper& sweeper, std::ostream& out, std::ostream& err) {
  Attempt attempt(o, logs, out, err);
  attempt.start(program, command, common, sweeper);
  while (attempt.step()) {
  }
  AttemptResult result = attempt.finish();
  for (const pid_t pid : result.pids) sweeper.reaped(pid);
  return result;
}

std::string draw_token() {
  char text[24];
  std::snprintf(text, sizeof text, "0x%016llx",
                static_cast<unsigned long long>(core::random_u64()));
  return text;
}

}  // namespace

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  RINGLET_CHECK(fd >= 0, Error, "launch: socket failed: ", std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof addr;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  const int error = errno;
  ::close(fd);
  RINGLET_CHECK(ok, Error, "launch: cannot find a free port: ", std::strerror(error));
  return ntohs(addr.sin_port);
}

namespace {

// What every node's workers share: ringlet's job token and the job's MASTER_PORT.
struct JobAgreement {
  std::string token;
  int master_port = 0;
};

// Node 0 draws the token and a free MASTER_PORT, publishes them and waits until every other
// node's launcher has read them; the others read them. Single node: no store round trips.
JobAgreement agree_on_job(const LaunchOptions& o, int port) {
  if (o.nnodes == 1) return {draw_token(), free_port()};
  const Deadline deadline = Deadline::after(o.rdzv_timeout);
  const std::string where = core::str(o.master_addr, ":", port);
  if (o.node_rank != 0) {
    try {
      transport::TcpStore store(o.master_addr, port, deadline);
      JobAgreement job{store.get(kTokenKey, deadline), 0};
      job.master_port = static_cast<int>(
          core::parse_int(store.get(kJobPortKey, deadline), "the job's MASTER_PORT"));
      store.add(kJoinedKey, 1);
      return job;
    } catch (const core::TimeoutError& e) {
      RINGLET_THROW(TimeoutError, "launch: node ", o.node_rank, " found no launcher of node 0 at ",
                    where, " within ", o.rdzv_timeout.count(), " s: ", e.what());
    }
  }
  transport::TcpStore store(o.master_addr, port, deadline);
  const JobAgreement job{draw_token(), free_port()};
  store.set(kJobPortKey, std::to_string(job.master_port));
  store.set(kTokenKey, job.token);
  std::int64_t joined = 0;
  while ((joined = store.add(kJoinedKey, 0)) < o.nnodes - 1) {
    RINGLET_CHECK(!deadline.expired(), TimeoutError, "launch: only ", joined, " of the ",
                  o.nnodes - 1, " other node(s) joined at ", where, " within ",
                  o.rdzv_timeout.count(), " s");
    std::this_thread::sleep_for(std::chrono::milliseconds(kPollMs));
  }
  return job;
}

// torchrun's notice, word for word, when it sets OMP_NUM_THREADS for the workers.
void set_omp_threads(const LaunchOptions& o, std::ostream& err) {
  if (!o.omp_one_thread || o.nproc_per_node <= 1 || std::getenv("OMP_NUM_THREADS") != nullptr)
    return;
  ::setenv("OMP_NUM_THREADS", "1", 1);
  err << "*****************************************\n"
         "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to "
         "avoid your system being overloaded, please further tune the variable for optimal "
         "performance in your application as needed. \n"
         "*****************************************\n";
}

// The variables every worker of one attempt shares (each adds its RANK, LOCAL_RANK, ROLE_RANK).
Env job_environment(const LaunchOptions& o, int attempt, int store_port, const JobAgreement& job) {
  const std::string world = std::to_string(o.nnodes * o.nproc_per_node);
  return {
      {"WORLD_SIZE", world},
      {"LOCAL_WORLD_SIZE", std::to_string(o.nproc_per_node)},
      {"GROUP_RANK", std::to_string(o.node_rank)},
      {"GROUP_WORLD_SIZE", std::to_string(o.nnodes)},
      {"ROLE_NAME", "default"},
      {"ROLE_WORLD_SIZE", world},
      {"MASTER_ADDR", o.master_addr},
      {"MASTER_PORT", std::to_string(job.master_port)},
      {"TORCHELASTIC_RESTART_COUNT", std::to_string(attempt)},
      {"TORCHELASTIC_MAX_RESTARTS", std::to_string(o.max_restarts)},
      {"TORCHELASTIC_RUN_ID", o.run_id},
      // The workers' own rank 0 hosts torch's store at MASTER_PORT; ringlet's is not torch's.
      {"TORCHELASTIC_USE_AGENT_STORE", "False"},
      {"RINGLET_STORE_ADDR", o.master_addr},
      {"RINGLET_STORE_PORT", std::to_string(store_port)},
      {"RINGLET_JOB_TOKEN", job.token},
      {"RINGLET_STORE_HOSTED", "1"},
      {"RINGLET_RESTART_COUNT", std::to_string(attempt)},
      {"RINGLET_MAX_RESTARTS", std::to_string(o.max_restarts)},
      {"RINGLET_RDZV_TIMEOUT", std::to_string(o.rdzv_timeout.count())},
  };
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

std::chrono::seconds default_rdzv_timeout() {
  return std::chrono::seconds(
      core::env_int("RINGLET_RDZV_TIMEOUT", 600, 1, kMaxRdzvTimeoutSeconds));
}

int launch(LaunchOptions options, const std::vector<std::string>& command, std::ostream& out,
           std::ostream& err) {
  validate(options, command);
  options.exit_timeout = collectives::resolve_timeout(options.exit_timeout);
  const std::string program = resolve_program(command[0]);
  set_omp_threads(options, err);
  std::filesystem::path log_root;
  if (!options.log_dir.empty() && (options.tee | options.redirects) != 0) {
    log_root = make_log_root(options.log_dir, options.run_id);
    err << "ringlet launch: worker logs in " << log_root.string() << "\n";
  }
  OrphanSweeper sweeper;  // for a launcher killed before it could sweep
  for (int attempt = 0;; ++attempt) {
    // A fresh store per attempt: no keys left over from the failed one, and with master_port 0
    // a new port, so a straggler of the old attempt cannot reach the new one.
    std::unique_ptr<transport::TcpStoreServer> server;
    if (options.node_rank == 0)
      server =
          transport::host_tcp_store(options.master_addr, options.master_port, options.port_name);
    const int port = server ? server->port() : options.master_port;
    const Env common = job_environment(options, attempt, port, agree_on_job(options, port));
    WorkerLogs logs(log_root, attempt, options.nproc_per_node, log_root.empty() ? 0 : options.tee,
                    log_root.empty() ? 0 : options.redirects);
    const AttemptResult result =
        run_attempt(options, logs, program, command, common, sweeper, out, err);
    // Every worker has exited: what a killed one left in /dev/shm goes now, not at the next job.
    const int swept = transport::remove_objects_of(result.pids);
    if (swept > 0) {
      err << "ringlet launch: removed " << swept
          << " shared-memory object(s) the exited workers left in /dev/shm\n";
    }
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
    err << "ringlet launch: error: rank " << result.failed_rank << " " << result.failure;
    if (options.max_restarts > 0) err << " after " << options.max_restarts << " restart(s)";
    err << "\n";
    err.flush();
    return result.status;
  }
}

}  // namespace ringlet::distributed
