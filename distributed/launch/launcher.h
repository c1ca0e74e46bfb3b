// `ringlet launch`: torchrun for ringlet. Starts nproc_per_node workers of any command with
// torchrun's environment (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK,
// GROUP_WORLD_SIZE, ROLE_*, TORCHELASTIC_*, MASTER_ADDR, MASTER_PORT) plus ringlet's own
// (RINGLET_STORE_ADDR/PORT, RINGLET_JOB_TOKEN, RINGLET_STORE_HOSTED=1), hosts ringlet's TCP store
// on node 0, prefixes the workers' output with "[rank R] " (and writes per-rank log files when
// asked), forwards SIGINT/SIGTERM, and stops everyone when one worker fails.
//
// Two stores, two ports: ringlet's store listens on RINGLET_STORE_PORT (master_port when given);
// MASTER_PORT is a port free when the job starts, left to the job, so that a torch.distributed
// script's rank 0 can host its own store there as it does under torchrun. ringlet's workers
// read RINGLET_STORE_ADDR/PORT before MASTER_ADDR/PORT.
#pragma once

#include <chrono>
#include <ostream>
#include <string>
#include <vector>

#include "core/rank_limits.h"

namespace ringlet::distributed {

// The most workers one node runs, for `ringlet launch` and `ringlet train/eval --nproc` alike.
inline constexpr int kMaxWorkersPerNode = core::kMaxLocalRanks;
// The longest rendezvous timeout (--rdzv-timeout, RINGLET_RDZV_TIMEOUT), in seconds: 7 days.
inline constexpr int kMaxRdzvTimeoutSeconds = 7 * 86400;

struct LaunchOptions {
  int nproc_per_node = 1;
  // Static multi-node: one launcher per node, started by the user (or a scheduler) with the same
  // nnodes, master_addr and master_port and its own node_rank; global rank = node_rank *
  // nproc_per_node + local rank. Node 0 hosts the store and waits for every node to join.
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0 = pick a free port (single node only: other nodes must know it)
  std::string port_name = "--master-port";  // where the user set it, for error messages
  // On a worker failure, stop all workers and start them all again, this many times at most
  // (single node only). Each attempt gets a fresh store (a new port when master_port is 0) and a
  // new job token; workers see RINGLET_RESTART_COUNT. `ringlet train` workers of a restarted
  // job resume from the run directory's checkpoint when there is one (give every worker the
  // same --out; `ringlet train --nproc` does), so a restart loses at most one epoch.
  int max_restarts = 0;
  // How long node 0 waits for the other nodes' launchers to join, and they for node 0.
  std::chrono::seconds rdzv_timeout{600};
  bool quiet_others = false;  // print rank 0's lines only (a failed rank's last stderr lines too)
  // TORCHELASTIC_RUN_ID (torchrun's --rdzv-id).
  std::string run_id = "none";
  // torchrun's OMP_NUM_THREADS=1 for every worker (with its notice) when the variable is unset
  // and several workers share the node. Off for ringlet's own commands, which size their
  // thread pools themselves.
  bool omp_one_thread = false;
  // The python interpreter the workers run under (a script.py or -m module), "" for any other
  // command: a worker's ModuleNotFoundError then names it and how to choose another.
  std::string python;
  // Per-rank log files (see worker_logs.h): stream bits 1 stdout, 2 stderr; log_dir empty: none.
  std::string log_dir;
  int tee = 0;
  int redirects = 0;
  // After the first failure, workers get this long to exit before SIGKILL.
  std::chrono::milliseconds stop_grace{5000};
  // After a forwarded SIGINT, SIGTERM or SIGUSR1 (Slurm's --signal), this long: a `ringlet
  // train` worker finishes its step and writes a checkpoint first (torchrun also waits 30 s).
  std::chrono::milliseconds signal_grace{30000};
  // Once a worker has exited 0, the others get this long to exit too; one still running then
  // is hung (stopped, or in a wait without a peer) and fails the attempt like a crash.
  // 0: the collectives' deadline (RINGLET_TIMEOUT, else 10 minutes).
  std::chrono::milliseconds exit_timeout{0};
};

// Runs `command` (program and arguments; the program is looked up in PATH like execvp) as
// options.nproc_per_node workers and returns when all have exited: 0 when every worker exited
// 0; otherwise the failing worker's status (its exit code, or 128 + signal) after naming its
// rank on `err`; 128 + signal when the launcher itself got SIGINT, SIGTERM or SIGUSR1. Worker
// stdout lines go to `out`, stderr lines to `err`. Installs those signals' handlers for its
// duration (restored on return), so one launch() may run at a time per process; a second concurrent
// call throws core::Error. Throws core::ValueError for bad options or a command that is not found,
// core::TimeoutError when the nodes do not all join within rdzv_timeout.
// The rendezvous timeout the commands start from: RINGLET_RDZV_TIMEOUT (seconds), else 600
// (a flag overrides it; ValueError naming the variable when it is malformed).
std::chrono::seconds default_rdzv_timeout();

// A TCP port nobody listens on now (bound to port 0, read back, closed), as torchrun picks
// MASTER_PORT; core::Error when none can be bound.
int free_port();

int launch(LaunchOptions options, const std::vector<std::string>& command, std::ostream& out,
           std::ostream& err);

}  // namespace ringlet::distributed
