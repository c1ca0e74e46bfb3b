// The launcher: environment and rank-prefixed output of `sh -c` workers, failure propagation
// (exit code, signal, a stuck worker escalated to SIGKILL), quiet_others, restarts, forwarded
// SIGINT, a missing command, and the `ringlet launch` binary end to end (RINGLET_BINARY, compiled
// in by tests/meson.build) on one node and as two node launchers on loopback; `ringlet train
// --nproc 2` restarting and resuming after kill -9 of a worker, or naming it with no restarts left;
// bad input (WORLD_SIZE mismatch, the store port in use, a rank that never arrives); workers
// started by Open MPI's mpirun.
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/file_io.h"
#include "distributed/launch/launcher.h"
#include "raw_socket.h"
#include "ringlet_command.h"
#include "sanitized.h"
#include "temp_dir.h"
#include "training_runs.h"

namespace fs = std::filesystem;
using ringlet::distributed::launch;
using ringlet::distributed::LaunchOptions;
using namespace ringlet::testing;

namespace {

using Clock = std::chrono::steady_clock;

struct Result {
  int status;
  std::string out, err;
  double seconds;
};

Result run_sh(LaunchOptions options, const std::string& script) {
  std::ostringstream out, err;
  const auto start = Clock::now();
  const int status = launch(options, {"/bin/sh", "-c", script}, out, err);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return {status, out.str(), err.str(), seconds};
}

LaunchOptions nproc(int n) {
  LaunchOptions o;
  o.nproc_per_node = n;
  return o;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Runs the ringlet binary under `timeout` (so a hang fails the test instead of blocking it; 60 s,
// longer under a sanitizer), with `env` (VAR=value ...) added to its environment.
FILE* start_ringlet(const std::string& args, const std::string& env = "") {
  return start_command("timeout " + std::to_string(60 * kSanitizerSlowdown) + " env " + env + " '" +
                       require_ringlet_binary() + "' " + args);
}

CommandResult finish_ringlet(FILE* pipe) { return finish_command(pipe); }

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  socklen_t len = sizeof addr;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  ::close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace

TEST_CASE("launch: every worker gets torchrun's environment and its lines are prefixed") {
  const Result r = run_sh(nproc(3),
                          "echo rank=$RANK world=$WORLD_SIZE local=$LOCAL_RANK "
                          "lws=$LOCAL_WORLD_SIZE token=${RINGLET_JOB_TOKEN:+set} "
                          "hosted=$RINGLET_STORE_HOSTED addr=$MASTER_ADDR; "
                          "echo port=$MASTER_PORT job=$RINGLET_JOB_TOKEN; echo to-stderr >&2");
  CHECK(r.status == 0);
  const auto lines = split_lines(r.out);
  REQUIRE(lines.size() == 6);
  std::set<std::string> ports_and_tokens;
  for (int rank = 0; rank < 3; ++rank) {
    const std::string prefix = "[rank " + std::to_string(rank) + "] ";
    const std::string expected = prefix + "rank=" + std::to_string(rank) +
                                 " world=3 local=" + std::to_string(rank) +
                                 " lws=3 token=set hosted=1 addr=127.0.0.1";
    int seen = 0;
    for (const auto& line : lines) {
      if (line == expected) ++seen;
      if (line.rfind(prefix + "port=", 0) == 0) ports_and_tokens.insert(line.substr(prefix.size()));
    }
    CHECK_MESSAGE(seen == 1, "missing: ", expected, "\n", r.out);
    CHECK(contains(r.err, prefix + "to-stderr\n"));
  }
  // Same store and token for everyone, and a real port.
  REQUIRE(ports_and_tokens.size() == 1);
  CHECK(!contains(*ports_and_tokens.begin(), "port=0 "));
  for (const auto& line : lines) CHECK(line.rfind("[rank ", 0) == 0);
}

TEST_CASE("ringlet launch: RINGLET_RDZV_TIMEOUT reaches the workers unless --rdzv-timeout") {
  CommandResult result = finish_ringlet(
      start_ringlet("launch --nproc-per-node 2 -- sh -c 'echo rdzv=$RINGLET_RDZV_TIMEOUT'",
                    "RINGLET_RDZV_TIMEOUT=7"));
  CHECK(result.status == 0);
  CHECK(contains(result.output, "[rank 1] rdzv=7\n"));
  result = finish_ringlet(start_ringlet(
      "launch --nproc-per-node 1 --rdzv-timeout 9 -- sh -c 'echo rdzv=$RINGLET_RDZV_TIMEOUT'",
      "RINGLET_RDZV_TIMEOUT=7"));
  CHECK(contains(result.output, "[rank 0] rdzv=9\n"));
}

TEST_CASE("launch: a failing worker stops the others and its exit code is returned") {
  const Result r = run_sh(nproc(3),
                          "if [ \"$RANK\" = 1 ]; then echo dying >&2; exit 3; fi; sleep 30; "
                          "echo not-stopped");
  CHECK(r.status == 3);
  CHECK(r.seconds < 10.0);
  CHECK(contains(r.err, "[rank 1] dying"));
  CHECK(contains(r.err, "rank 1 (pid "));
  CHECK(contains(r.err, "error: rank 1 failed with exit code 3"));
  CHECK(!contains(r.out, "not-stopped"));
}

TEST_CASE("launch: a worker killed by a signal gives 128 + signal") {
  const Result r = run_sh(nproc(2), "if [ \"$RANK\" = 0 ]; then kill -9 $$; fi; sleep 30");
  CHECK(r.status == 128 + SIGKILL);
  CHECK(r.seconds < 10.0);
  CHECK(contains(r.err, "rank 0 failed with signal 9 (SIGKILL)"));
}

// What killed workers leave in /dev/shm (an unattached shm segment, the emulated RDMA device's
// objects: named with their creator's pid) is removed once every worker has exited.
TEST_CASE("launch: shared-memory objects of killed workers are removed when they exit") {
  const std::string marker = "launchtest" + std::to_string(::getpid());
  const auto left = [&] {
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator("/dev/shm"))
      n += e.path().filename().string().find(marker) != std::string::npos;
    return n;
  };
  // Rank 0 dies once rank 1 has made its objects too (a bounded wait).
  const Result r = run_sh(
      nproc(2), "touch /dev/shm/ringlet-shm-$$-" + marker + "-$RANK /dev/shm/ringlet-ibemu-$$-" +
                    marker + "-$RANK; if [ \"$RANK\" = 0 ]; then for i in $(seq 100); do " +
                    "ls /dev/shm/ringlet-ibemu-*-" + marker + "-1 >/dev/null 2>&1 && break; " +
                    "sleep 0.05; done; kill -9 $$; fi; sleep 30");
  CHECK(r.status == 128 + SIGKILL);
  CHECK(left() == 0);
  CHECK(contains(r.err, "removed 4 shared-memory object(s) the exited workers left"));
}

TEST_CASE("launch: a worker that ignores SIGTERM is killed after the grace period") {
  LaunchOptions o = nproc(2);
  o.stop_grace = std::chrono::milliseconds(500);
  // Rank 1 fails only once rank 0 ignores SIGTERM (bounded: 10 s at most).
  const std::string flag =
      (fs::temp_directory_path() / ("ringlet_trapped_" + std::to_string(::getpid()))).string();
  const Result r = run_sh(o, "if [ \"$RANK\" = 1 ]; then i=0; while [ ! -e '" + flag +
                                 "' ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; "
                                 "exit 2; fi; trap '' TERM; touch '" +
                                 flag + "'; sleep 30");
  fs::remove(flag);
  CHECK(r.status == 2);
  CHECK(r.seconds < 15.0);
  CHECK(contains(r.err, "sending SIGKILL"));
}

TEST_CASE("launch: a worker still running after another succeeded is hung, within a deadline") {
  LaunchOptions o = nproc(3);
  o.exit_timeout = std::chrono::milliseconds(500);
  o.stop_grace = std::chrono::milliseconds(500);
  // Rank 2 stops itself (as SIGSTOP or a debugger would); the deadline starts when rank 0 or 1
  // exits. SIGTERM stays pending on a stopped process, so only the deadline and SIGKILL end it.
  Result r = run_sh(o, "if [ \"$RANK\" = 2 ]; then kill -STOP $$; fi; exit 0");
  CHECK(r.status == 1);
  CHECK(r.seconds < 10.0);
  CHECK(contains(r.err, "rank 2 (pid "));
  CHECK(contains(r.err, ") is still running 500 ms after rank "));  // 0 or 1, whichever was first
  CHECK(contains(r.err, " exited successfully (stopped, or waiting for a peer that is gone)"));
  CHECK(contains(r.err, "sending SIGKILL"));
  CHECK(contains(r.err, "error: rank 2 did not exit within 500 ms of rank "));
  // Ranks that finish apart, within the deadline, are a success.
  o.exit_timeout = std::chrono::milliseconds(3000);
  r = run_sh(o, "sleep \"0.$RANK\"; exit 0");
  CHECK(r.status == 0);
}

TEST_CASE("launch: quiet_others shows rank 0 only, and a failed quiet rank's last stderr") {
  LaunchOptions o = nproc(3);
  o.quiet_others = true;
  Result r = run_sh(o, "echo hello from $RANK; echo warn $RANK >&2");
  CHECK(r.status == 0);
  CHECK(r.out == "[rank 0] hello from 0\n");
  CHECK(r.err == "[rank 0] warn 0\n");

  r = run_sh(o, "if [ \"$RANK\" = 2 ]; then echo boom >&2; exit 5; fi; sleep 30");
  CHECK(r.status == 5);
  CHECK(contains(r.err, "last stderr lines of rank 2:\n[rank 2] boom\n"));
}

TEST_CASE("launch: restarts run every worker again with a fresh store") {
  LaunchOptions o = nproc(2);
  o.max_restarts = 2;
  Result r = run_sh(o,
                    "echo attempt=$RINGLET_RESTART_COUNT port=$MASTER_PORT; "
                    "if [ \"$RINGLET_RESTART_COUNT\" = 0 ] && [ \"$RANK\" = 1 ]; then exit 4; fi");
  CHECK(r.status == 0);
  CHECK(contains(r.err, "restarting all 2 workers (restart 1 of 2)"));
  CHECK(contains(r.out, "[rank 0] attempt=1 "));
  CHECK(contains(r.out, "[rank 1] attempt=1 "));
  CHECK(!contains(r.out, "attempt=2"));

  o.max_restarts = 1;
  r = run_sh(o, "if [ \"$RANK\" = 0 ]; then exit 6; fi; sleep 30");
  CHECK(r.status == 6);
  CHECK(contains(r.err, "restart 1 of 1"));
  CHECK(contains(r.err, "error: rank 0 failed with exit code 6 after 1 restart(s)"));
}

TEST_CASE("launch: SIGINT to the launcher reaches the workers and the handler is restored") {
  const fs::path dir = fs::temp_directory_path() / ("ringlet_launch_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  struct sigaction before {};
  ::sigaction(SIGINT, nullptr, &before);
  std::atomic<bool> sent{false};
  std::thread interrupter([&] {
    // Only after both workers are up: the launcher's handler is installed by then.
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    while (Clock::now() < deadline && !(fs::exists(dir / "up.0") && fs::exists(dir / "up.1"))) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (fs::exists(dir / "up.0") && fs::exists(dir / "up.1")) {
      sent = true;
      ::kill(::getpid(), SIGINT);
    }
  });
  // The shell traps SIGINT before it says it is up: a SIGINT that came between a foreground
  // child's normal exit and the next command would otherwise be lost (the shell waits for its
  // child and then carries on, as shells do) and the worker would sleep on.
  const Result r =
      run_sh(nproc(2), "trap 'kill $p; exit 130' INT; sleep 30 >/dev/null 2>&1 & p=$!; touch '" +
                           dir.string() + "/up.'$RANK; wait");
  interrupter.join();
  fs::remove_all(dir);
  REQUIRE(sent);
  CHECK(r.status == 128 + SIGINT);
  CHECK(r.seconds < 15.0);
  CHECK(contains(r.err, "got SIGINT; forwarding it to the workers"));
  struct sigaction now {};
  ::sigaction(SIGINT, nullptr, &now);
  const bool restored = now.sa_handler == before.sa_handler;
  CHECK(restored);
}

TEST_CASE("launch: bad input is a clear error") {
  std::ostringstream out, err;
  try {
    launch(nproc(2), {"ringlet-no-such-command", "x"}, out, err);
    FAIL("expected an error");
  } catch (const ringlet::core::ValueError& e) {
    CHECK(contains(e.what(), "command 'ringlet-no-such-command' not found"));
  }
  CHECK_THROWS_AS(launch(nproc(0), {"true"}, out, err), ringlet::core::ValueError);
  CHECK_THROWS_AS(launch(nproc(1), {}, out, err), ringlet::core::ValueError);
  LaunchOptions two_nodes = nproc(1);
  two_nodes.nnodes = 2;  // no explicit port: the other node could not find the store
  CHECK_THROWS_AS(launch(two_nodes, {"true"}, out, err), ringlet::core::ValueError);
}

TEST_CASE("ringlet launch: the binary end to end") {
  CommandResult result =
      finish_ringlet(start_ringlet("launch --nproc-per-node 2 -- /bin/sh -c 'echo $RANK'"));
  CHECK(result.status == 0);
  CHECK(contains(result.output, "[rank 0] 0\n"));
  CHECK(contains(result.output, "[rank 1] 1\n"));

  result = finish_ringlet(
      start_ringlet("launch --nproc_per_node=2 /bin/sh -c '[ $RANK = 1 ] && exit 7; sleep 30'"));
  CHECK(result.status == 7);
  CHECK(contains(result.output, "rank 1 failed with exit code 7"));

  result = finish_ringlet(start_ringlet("launch --nproc-per-nod 2 -- true"));
  CHECK(result.status == 2);
  CHECK(contains(result.output, "did you mean '--nproc-per-node'?"));

  result = finish_ringlet(start_ringlet("launch --nproc-per-node 2"));
  CHECK(result.status == 2);
  CHECK(contains(result.output, "missing the command"));
}

TEST_CASE("ringlet launch as torchrun: its environment, python for .py, rendezvous flags, logs") {
  ringlet::testing::TempDir dir("ringlet_launch_torchrun");
  // A python worker that prints torchrun's variables and checks that MASTER_PORT is free for the
  // job (rank 0 of a torch.distributed script binds it) while ringlet's store is elsewhere.
  const fs::path script = dir.path / "show_env.py";
  std::ofstream(script)
      << "import os, socket, sys\n"
         "keys = ['RANK', 'LOCAL_RANK', 'WORLD_SIZE', 'LOCAL_WORLD_SIZE', 'GROUP_RANK',\n"
         "        'GROUP_WORLD_SIZE', 'ROLE_NAME', 'ROLE_RANK', 'ROLE_WORLD_SIZE',\n"
         "        'TORCHELASTIC_RESTART_COUNT', 'TORCHELASTIC_MAX_RESTARTS',\n"
         "        'TORCHELASTIC_RUN_ID', 'TORCHELASTIC_USE_AGENT_STORE', 'OMP_NUM_THREADS']\n"
         "print(' '.join(k + '=' + os.environ.get(k, '?') for k in keys))\n"
         "assert os.environ['MASTER_PORT'] != os.environ['RINGLET_STORE_PORT']\n"
         "if os.environ['RANK'] == '0':\n"
         "    s = socket.socket(); s.bind(('127.0.0.1', int(os.environ['MASTER_PORT']))); "
         "s.close()\n"
         "    print('master port free')\n"
         "print('argv', sys.argv[1:], file=sys.stderr)\n";
  const std::string py = "'" + script.string() + "'";
  CommandResult r = finish_ringlet(start_ringlet(
      "launch --nproc-per-node 2 --rdzv-id job7 " + py + " a b", "-u OMP_NUM_THREADS"));
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(contains(r.output,
                 "[rank 1] RANK=1 LOCAL_RANK=1 WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 GROUP_RANK=0 "
                 "GROUP_WORLD_SIZE=1 ROLE_NAME=default ROLE_RANK=1 ROLE_WORLD_SIZE=2 "
                 "TORCHELASTIC_RESTART_COUNT=0 TORCHELASTIC_MAX_RESTARTS=0 "
                 "TORCHELASTIC_RUN_ID=job7 TORCHELASTIC_USE_AGENT_STORE=False OMP_NUM_THREADS=1"));
  CHECK(contains(r.output, "[rank 0] master port free"));
  CHECK(contains(r.output, "[rank 0] argv ['a', 'b']"));
  CHECK(
      contains(r.output, "Setting OMP_NUM_THREADS environment variable for each process to be 1"));

  SUBCASE("a set OMP_NUM_THREADS is left alone, without the notice") {
    r = finish_ringlet(start_ringlet("launch --nproc-per-node 2 " + py, "OMP_NUM_THREADS=3"));
    CHECK(contains(r.output, "OMP_NUM_THREADS=3"));
    CHECK_FALSE(contains(r.output, "Setting OMP_NUM_THREADS"));
  }
  SUBCASE("--standalone, and c10d at an endpoint") {
    r = finish_ringlet(start_ringlet("launch --standalone --nproc_per_node=2 " + py));
    CHECK(r.status == 0);
    CHECK(contains(r.output, "[rank 0] master port free"));
    const int port = free_port();
    r = finish_ringlet(start_ringlet(
        "launch --rdzv-backend=c10d --rdzv-endpoint 127.0.0.1:" + std::to_string(port) +
        " --nproc-per-node 2 -- /bin/sh -c "
        "'echo store=$RINGLET_STORE_PORT'"));
    CHECK(r.status == 0);
    CHECK(contains(r.output, "[rank 1] store=" + std::to_string(port) + "\n"));
  }
  SUBCASE("-m module and --no-python") {
    r = finish_ringlet(start_ringlet("launch -m --nproc-per-node cpu show_env x",
                                     "PYTHONPATH='" + dir.path.string() + "'"));
    CHECK(r.status == 0);
    CHECK(contains(r.output, "[rank 0] argv ['x']"));
    const fs::path exe = dir.path / "direct.py";
    std::ofstream(exe) << "#!/bin/sh\necho direct $RANK\n";
    fs::permissions(exe, fs::perms::owner_all);
    r = finish_ringlet(start_ringlet("launch --no-python '" + exe.string() + "'"));
    CHECK(r.status == 0);
    CHECK(contains(r.output, "[rank 0] direct 0\n"));
  }
  SUBCASE("--log-dir with --redirects: per-rank files, not the console") {
    const fs::path logs = dir.path / "logs";
    r = finish_ringlet(start_ringlet("launch --nproc-per-node 2 --rdzv-id j --log-dir '" +
                                     logs.string() +
                                     "' -r 1 -- /bin/sh -c "
                                     "'echo out $RANK; echo err $RANK >&2'"));
    CHECK(r.status == 0);
    CHECK_FALSE(contains(r.output, "out 1"));
    CHECK(contains(r.output, "[rank 1] err 1"));  // stderr is not redirected
    std::vector<fs::path> roots;
    for (const auto& entry : fs::directory_iterator(logs)) roots.push_back(entry.path());
    REQUIRE(roots.size() == 1);
    CHECK(roots[0].filename().string().rfind("j_", 0) == 0);
    CHECK(contains(r.output, "worker logs in " + roots[0].string()));
    for (int rank = 0; rank < 2; ++rank) {
      const fs::path attempt = roots[0] / "attempt_0" / std::to_string(rank);
      CHECK(ringlet::core::read_file_text(attempt / "stdout.log") ==
            "out " + std::to_string(rank) + "\n");
      CHECK_FALSE(fs::exists(attempt / "stderr.log"));
    }
  }
  SUBCASE("flags torchrun users may mistype or this launcher does not take") {
    const std::pair<const char*, const char*> cases[] = {
        {"launch --rdzv-backend etcd true", "--rdzv-backend etcd is not supported"},
        {"launch --rdzv-backend c10d true", "needs --rdzv-endpoint host[:port]"},
        {"launch --tee 1 true", "give --log-dir DIR"},
        {"launch --tee 0:1,1:2 --log-dir /tmp true", "a value per local rank is not supported"},
        {"launch --redirects 5 --log-dir /tmp true", "expects 0 (none), 1 (stdout)"},
        {"launch --nproc-per-node gpu true", "this machine has no usable GPU"},
        {"launch --nproc-per-node 257 true", "--nproc-per-node must be in [1, 256]"},
        {"launch --no-python -m x", "--no-python and -m cannot go together"},
        {"launch --standalone --nnodes 2 true", "--standalone runs one node"},
    };
    for (const auto& c : cases) {
      const char* args = c.first;
      const char* message = c.second;
      r = finish_ringlet(start_ringlet(args));
      INFO(args, "\n", r.output);
      CHECK(r.status == 2);
      CHECK(contains(r.output, message));
    }
  }
}

TEST_CASE("ringlet launch: PYTHON_EXEC picks the python, named; a missing module says how") {
  ringlet::testing::TempDir dir("ringlet_launch_python");
  const fs::path script = dir.path / "needs_module.py";
  std::ofstream(script) << "import ringlet_no_such_module\n";
  const CommandResult r = finish_ringlet(start_ringlet(
      "launch --nproc-per-node 2 '" + script.string() + "'", "PYTHON_EXEC=/usr/bin/python3"));
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(
      contains(r.output, "ringlet launch: running " + script.string() + " with /usr/bin/python3"));
  CHECK(contains(r.output,
                 "ringlet launch: /usr/bin/python3 has no module 'ringlet_no_such_module'; run "
                 "the workers with another python (RINGLET_PYTHON=/path/to/python, or torchrun's "
                 "PYTHON_EXEC)"));
}

TEST_CASE("ringlet launch: two node launchers on loopback share one store and token") {
  const std::string port = std::to_string(free_port());
  const std::string common =
      "launch --nnodes 2 --nproc-per-node 2 --master-addr 127.0.0.1 "
      "--master-port " +
      port + " --rdzv-timeout 30 ";
  const std::string script =
      " -- /bin/sh -c 'echo rank=$RANK world=$WORLD_SIZE "
      "node=$GROUP_RANK job=$RINGLET_JOB_TOKEN'";
  FILE* node1 = start_ringlet(common + "--node-rank 1" + script);
  FILE* node0 = start_ringlet(common + "--node-rank 0" + script);
  const CommandResult node0_result = finish_ringlet(node0);
  const CommandResult node1_result = finish_ringlet(node1);
  CHECK_MESSAGE(node0_result.status == 0, node0_result.output);
  CHECK_MESSAGE(node1_result.status == 0, node1_result.output);
  std::set<std::string> tokens;
  for (int rank = 0; rank < 4; ++rank) {
    const std::string& output = rank < 2 ? node0_result.output : node1_result.output;
    const std::string line = "[rank " + std::to_string(rank) + "] rank=" + std::to_string(rank) +
                             " world=4 node=" + std::to_string(rank / 2) + " job=";
    const auto at = output.find(line);
    REQUIRE_MESSAGE(at != std::string::npos, line, " not in:\n", output);
    tokens.insert(output.substr(at + line.size(), output.find('\n', at) - at - line.size()));
  }
  CHECK(tokens.size() == 1);

  // A node whose node 0 never comes: a clear timeout, not a hang.
  const CommandResult result =
      finish_ringlet(start_ringlet("launch --nnodes 2 --node-rank 1 --master-port " +
                                   std::to_string(free_port()) + " --rdzv-timeout 1 -- true"));
  CHECK(result.status == 1);
  CHECK(contains(result.output, "found no launcher of node 0"));
}

namespace {

// Starts a 3-epoch, 2-rank `ringlet train` into `dir`, kills rank 1 with SIGKILL during epoch 2
// (once epoch 1's checkpoint exists), and returns the run's exit status and output.
CommandResult train_and_kill_rank1(const fs::path& dir, int max_restarts) {
  fs::remove_all(dir);
  FILE* run = start_ringlet(
      "train --nproc 2 --epochs 3 --limit-train 4096 --limit-test 500 --threads 1 --workers 1 "
      "--log-every 8 --max-restarts " +
      std::to_string(max_restarts) + " --out '" + dir.string() + "'");
  const auto deadline = Clock::now() + std::chrono::seconds(40 * kSanitizerSlowdown);
  while (Clock::now() < deadline && !fs::exists(dir / "checkpoint.safetensors")) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // into epoch 2
  const pid_t victim = ringlet::testing::find_ringlet(dir.string(), 1);
  CHECK(victim > 0);
  if (victim > 0) ::kill(victim, SIGKILL);
  return finish_ringlet(run);
}

}  // namespace

TEST_CASE("ringlet train --nproc 2: kill -9 of a worker mid-epoch restarts and resumes") {
  const fs::path dir =
      fs::temp_directory_path() / ("ringlet_restart_" + std::to_string(::getpid()));
  CommandResult result = train_and_kill_rank1(dir, 1);
  INFO(result.output);
  CHECK(result.status == 0);
  CHECK(contains(result.output, "rank 1 (pid "));
  CHECK(contains(result.output, "failed with signal 9 (SIGKILL)"));
  CHECK(contains(result.output, "restarting all 2 workers (restart 1 of 1)"));
  CHECK(contains(result.output, "restart 1: resuming from the last checkpoint"));
  CHECK(contains(result.output, "resumed from " + (dir / "checkpoint.safetensors").string()));
  CHECK(contains(result.output, "done: 3 epoch(s) on 2 ranks"));
  std::ifstream metrics(dir / "metrics.jsonl");
  std::vector<std::string> epochs;
  for (std::string line; std::getline(metrics, line);) {
    epochs.push_back(line.substr(line.find("\"epoch\":"), 9));
  }
  CHECK(epochs == std::vector<std::string>{"\"epoch\":1", "\"epoch\":2", "\"epoch\":3"});

  // No restarts left: the launcher's error names the rank and the signal.
  result = train_and_kill_rank1(dir, 0);
  CHECK(result.status != 0);
  CHECK(contains(result.output, "error: rank 1 failed with signal 9 (SIGKILL)"));
  CHECK(!contains(result.output, "done: 3 epoch(s)"));
  fs::remove_all(dir);
}

TEST_CASE("bad input: WORLD_SIZE mismatch, a port in use, a rank that never arrives") {
  const fs::path dir =
      fs::temp_directory_path() / ("ringlet_badinput_" + std::to_string(::getpid()));
  const std::string train =
      "train --epochs 1 --limit-train 64 --limit-test 10 --workers 1 --out '" + dir.string() + "'";
  // Rank 1 is started with another WORLD_SIZE: both ranks stop at once, naming the mismatch.
  auto start = Clock::now();
  CommandResult result = finish_ringlet(start_ringlet(
      "launch --nproc-per-node 2 -- /bin/sh -c '[ \"$RANK\" = 1 ] && export WORLD_SIZE=3; exec \"" +
      ringlet_binary() + "\" " + train + "'"));
  CHECK(result.status == 1);
  CHECK(contains(result.output, "but another rank registered world size"));
  CHECK(contains(result.output, "every rank must get the same WORLD_SIZE"));
  CHECK(Clock::now() - start < std::chrono::seconds(20));

  // The store's port is taken by someone else.
  auto taken = std::make_unique<ringlet::testing::RawListener>();
  const std::string port = std::to_string(taken->port);
  result =
      finish_ringlet(start_ringlet("launch --nproc-per-node 2 --master-port " + port + " -- true"));
  CHECK(result.status != 0);
  CHECK(contains(result.output, "cannot listen on 127.0.0.1:" + port + ": Address already in use"));
  taken.reset();

  // A worker of a 2-rank job whose rank 1 never comes: rank 0 says every 5 s how many ranks
  // have arrived, then a clear timeout naming rank 1.
  start = Clock::now();
  result = finish_ringlet(
      start_ringlet(train,
                    "RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 RINGLET_RDZV_TIMEOUT=7 "
                    "MASTER_PORT=" +
                        std::to_string(free_port())));
  CHECK(result.status == 1);
  CHECK(contains(result.output, "mesh: rank 0 waiting: 1 of 2 ranks arrived (missing: 1)"));
  CHECK(contains(result.output, "rank(s) 1 of a world of 2 never arrived"));
  CHECK(Clock::now() - start < std::chrono::seconds(20));
  fs::remove_all(dir);
}

TEST_CASE("workers started by Open MPI's mpirun train as one job") {
  // openmpi-bin is installed by scripts/install-deps.sh; only its launcher is used.
  REQUIRE_MESSAGE(std::system("command -v mpirun >/dev/null 2>&1") == 0,
                  "mpirun not found: run scripts/install-deps.sh (openmpi-bin)");
  const fs::path dir = fs::temp_directory_path() / ("ringlet_mpirun_" + std::to_string(::getpid()));
  // mpirun's own daemons listen on ephemeral ports and may take the one free_port() found:
  // then rank 0 cannot host the store, and the job is run again on another port. The rendezvous
  // deadline bounds rank 1's wait for a store that is not there.
  const auto run = [&] {
    return finish_command(start_command(
        "timeout 60 mpirun --allow-run-as-root --oversubscribe -np 2 -x RINGLET_RDZV_TIMEOUT=30 "
        "-x MASTER_PORT=" +
        std::to_string(free_port()) + " '" + ringlet_binary() +
        "' train --epochs 1 --limit-train 256 --limit-test 100 --workers 1 --out '" + dir.string() +
        "'"));
  };
  CommandResult result = run();
  for (int attempt = 1; attempt < 3 && contains(result.output, "Address already in use");
       ++attempt) {
    result = run();
  }
  INFO(result.output);
  CHECK(result.status == 0);
  CHECK(contains(result.output, "data parallel over 2 ranks"));
  CHECK(contains(result.output, "done: 1 epoch(s) on 2 ranks"));
  CHECK(fs::exists(dir / "checkpoint.safetensors"));
  fs::remove_all(dir);
}

TEST_CASE("ringlet train --nproc 4: four local ranks train one job") {
  const fs::path dir = fs::temp_directory_path() / ("ringlet_four_" + std::to_string(::getpid()));
  const CommandResult result = finish_ringlet(
      start_ringlet("train --nproc 4 --epochs 1 --limit-train 1024 --limit-test 200 --workers 1 "
                    "--out '" +
                    dir.string() + "'"));
  INFO(result.output);
  CHECK(result.status == 0);
  CHECK(contains(result.output, "[rank 0] data parallel over 4 ranks"));
  CHECK(contains(result.output, "[rank 0] done: 1 epoch(s) on 4 ranks"));
  for (int rank = 1; rank < 4; ++rank) {
    CHECK(contains(result.output, "[rank " + std::to_string(rank) + "] [ringlet info] rank " +
                                      std::to_string(rank) + ": listening on"));
  }
  fs::remove_all(dir);
}
