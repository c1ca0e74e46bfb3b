// Multi-host launch from a host list (the GluonCV WORLD_URLS idea): `ringlet launch --hosts
// h1,h2 -- command` runs node 0's launcher here (this machine must be h1) and starts
// `ringlet launch --nnodes M --node-rank i ...` on every other host through ssh, in the same
// working directory and with the same ringlet binary path (a shared or identical install).
// The ssh command is RINGLET_SSH (default "ssh -o BatchMode=yes"), called as `SSH HOST
// COMMAND`; tests substitute a script that enters a network namespace instead.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "distributed/launch/launcher.h"

namespace ringlet::distributed {

struct HostsOptions {
  std::vector<std::string> hosts;  // node i runs on hosts[i]; hosts[0] is this machine
  std::string ssh;                 // empty: RINGLET_SSH or "ssh -o BatchMode=yes"
  std::string ringlet;             // the binary the other hosts run; empty: this one's path
};

// "h1,h2,h3" -> hosts (ValueError on an empty entry).
std::vector<std::string> parse_host_list(const std::string& list);
// One host per line; blank lines and '#' comments are skipped (ValueError naming the file when
// it cannot be read or lists no host).
std::vector<std::string> read_hostfile(const std::string& path);

// Quotes `word` for a POSIX shell ('...' with embedded quotes escaped).
std::string shell_quote(const std::string& word);

// The command line node `node_rank`'s launcher runs on its host.
std::string remote_launch_command(const LaunchOptions& options, const HostsOptions& hosts,
                                  int node_rank, const std::vector<std::string>& command);

// Starts the other nodes' launchers, runs node 0's here and waits for all. `options` gives
// nproc_per_node, master_port (0: a free port here), rdzv_timeout and quiet_others; nnodes,
// node_rank and master_addr (default hosts[0]) are derived. Returns node 0's status if it
// failed, else the first failing node's (its launcher's exit code, or 255 from ssh itself).
int launch_hosts(LaunchOptions options, const HostsOptions& hosts,
                 const std::vector<std::string>& command, std::ostream& out, std::ostream& err);

}  // namespace ringlet::distributed
