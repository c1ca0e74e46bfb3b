// `ringlet launch`: flags as in torchrun (--nproc-per-node or --nproc_per_node, "--flag value"
// or "--flag=value"); the first word that is not a flag, or everything after `--`, is the
// command. Bad flags are UsageErrors with the nearest valid flag; the work is launcher.cpp's.
#include "trainer/cli/launch_command.h"

#include <algorithm>

#include "core/env.h"
#include "trainer/cli/usage.h"
#include "trainer/launch/hosts.h"
#include "trainer/launch/launcher.h"

namespace ringlet::trainer::cli {

namespace {

constexpr const char* kLaunchHelp =
    "usage: ringlet launch [options] [--] command [args...]\n"
    "\n"
    "Runs `command` (any program, looked up in PATH) as nproc-per-node worker processes with\n"
    "torchrun's environment: RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK,\n"
    "MASTER_ADDR, MASTER_PORT, plus RINGLET_JOB_TOKEN, RINGLET_STORE_HOSTED=1 (node 0's launcher\n"
    "hosts the store), RINGLET_RESTART_COUNT and RINGLET_RDZV_TIMEOUT (seconds). Each output\n"
    "line is prefixed with \"[rank R] \". SIGINT and SIGTERM are forwarded to the workers. When\n"
    "a worker fails, the others are stopped (SIGTERM, then SIGKILL) and all are restarted while\n"
    "restarts remain (restarted `ringlet train` workers continue from the checkpoint in their\n"
    "--out directory); otherwise the exit status is the failing worker's (128 + N for signal N).\n"
    "Once a worker has exited 0, the others must exit within RINGLET_TIMEOUT ms (default 10\n"
    "minutes); one still running then (stopped, or waiting for a peer that is gone) counts as\n"
    "failed.\n"
    "\n"
    "options (underscores work too: --nproc_per_node):\n"
    "  --nproc-per-node N   workers on this node (default 1)\n"
    "  --nnodes M           nodes, one launcher each (default 1; with M > 1 give every node\n"
    "                       the same --master-addr and --master-port and its own --node-rank)\n"
    "  --node-rank R        this node's index in [0, M) (default 0)\n"
    "  --master-addr A      node 0's address, where the store listens (default 127.0.0.1)\n"
    "  --master-port P      the store's port (default 0: a free port, single node only)\n"
    "  --max-restarts K     restart all workers up to K times after a failure (default 0;\n"
    "                       single node only)\n"
    "  --rdzv-timeout S     seconds the node launchers wait for each other (default 600)\n"
    "  --hosts h1,h2,...    one node per host: node 0 here (this machine is h1), the others\n"
    "                       started over ssh (RINGLET_SSH, default \"ssh -o BatchMode=yes\") in\n"
    "                       this directory with this ringlet binary; master-addr defaults to h1\n"
    "  --hostfile FILE      the same, one host per line\n"
    "  --quiet-others       show rank 0's output only (and a failed rank's last stderr lines)\n"
    "  -h, --help           show this help\n";

const std::vector<std::string> kValueFlags = {
    "--nproc-per-node", "--nnodes",       "--node-rank", "--master-addr", "--master-port",
    "--max-restarts",   "--rdzv-timeout", "--hosts",     "--hostfile",
};

std::vector<std::string> all_flags() {
  std::vector<std::string> flags = kValueFlags;
  flags.insert(flags.end(), {"--quiet-others", "--help"});
  return flags;
}

// torchrun spells its flags with underscores (--nproc_per_node) and accepts dashes too.
std::string normalize(std::string flag) {
  std::replace(flag.begin() + std::min<std::size_t>(2, flag.size()), flag.end(), '_', '-');
  return flag;
}

int int_flag(const std::string& flag, const std::string& value, int min_value, int max_value) {
  std::int64_t parsed = 0;
  try {
    parsed = core::parse_int(value, flag);
  } catch (const core::ValueError&) {
    throw UsageError("launch: " + flag + " expects an integer, got '" + value + "'");
  }
  if (parsed < min_value || parsed > max_value) {
    throw UsageError("launch: " + flag + " must be in [" + std::to_string(min_value) + ", " +
                     std::to_string(max_value) + "], got " + value);
  }
  return static_cast<int>(parsed);
}

void set_flag(LaunchOptions& o, const std::string& flag, std::string value) {
  if (flag == "--nproc-per-node") {
    o.nproc_per_node = int_flag(flag, value, 1, 4096);
  } else if (flag == "--nnodes") {
    // torchrun's elastic MIN:MAX form is accepted only when it names one fixed size.
    if (const auto colon = value.find(':'); colon != std::string::npos) {
      if (value.substr(0, colon) != value.substr(colon + 1)) {
        throw UsageError("launch: --nnodes " + value +
                         ": an elastic MIN:MAX node range is not supported; give one number");
      }
      value = value.substr(0, colon);
    }
    o.nnodes = int_flag(flag, value, 1, 65536);
  } else if (flag == "--node-rank") {
    o.node_rank = int_flag(flag, value, 0, 65535);
  } else if (flag == "--master-addr") {
    if (value.empty()) throw UsageError("launch: --master-addr is empty");
    o.master_addr = value;
  } else if (flag == "--master-port") {
    o.master_port = int_flag(flag, value, 0, 65535);
  } else if (flag == "--max-restarts") {
    o.max_restarts = int_flag(flag, value, 0, 1000000);
  } else if (flag == "--rdzv-timeout") {
    o.rdzv_timeout = std::chrono::seconds(int_flag(flag, value, 1, 86400 * 7));
  }
}

}  // namespace

int launch_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  LaunchOptions options;
  options.rdzv_timeout = default_rdzv_timeout();
  HostsOptions hosts;
  bool node_flags = false;  // --nnodes / --node-rank, which a host list replaces
  std::size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') break;  // the command starts here
    if (arg == "-h" || arg == "--help") {
      out << kLaunchHelp;
      return 0;
    }
    const std::size_t eq = arg.find('=');
    const std::string flag = normalize(arg.substr(0, eq));
    if (flag == "--quiet-others") {
      if (eq != std::string::npos) throw UsageError("launch: --quiet-others takes no value");
      options.quiet_others = true;
      continue;
    }
    if (std::find(kValueFlags.begin(), kValueFlags.end(), flag) == kValueFlags.end()) {
      throw_unknown("launch", "option", flag, all_flags());
    }
    std::string value;
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else {
      if (i + 1 >= args.size()) throw UsageError("launch: " + flag + " needs a value");
      value = args[++i];
    }
    try {
      if (flag == "--hosts") {
        hosts.hosts = parse_host_list(value);
      } else if (flag == "--hostfile") {
        hosts.hosts = read_hostfile(value);
      }
    } catch (const core::ValueError& e) {
      throw UsageError(e.what());
    }
    node_flags = node_flags || flag == "--nnodes" || flag == "--node-rank";
    set_flag(options, flag, value);
  }
  const std::vector<std::string> command(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  if (command.empty()) {
    throw UsageError(
        "launch: missing the command to run (ringlet launch [options] -- command ...)");
  }
  if (!hosts.hosts.empty()) {
    if (node_flags) {
      throw UsageError("launch: --hosts/--hostfile set the nodes; drop --nnodes and --node-rank");
    }
    if (options.max_restarts > 0) {
      throw UsageError("launch: --max-restarts with several hosts is not supported yet");
    }
    return launch_hosts(options, hosts, command, out, err);
  }
  if (options.node_rank >= options.nnodes) {
    throw UsageError("launch: --node-rank " + std::to_string(options.node_rank) +
                     " must be below --nnodes " + std::to_string(options.nnodes));
  }
  if (options.nnodes > 1 && options.master_port == 0) {
    throw UsageError(
        "launch: --nnodes > 1 needs an explicit --master-port (the same on every node)");
  }
  if (options.nnodes > 1 && options.max_restarts > 0) {
    throw UsageError("launch: --max-restarts with --nnodes > 1 is not supported yet");
  }
  return launch(options, command, out, err);
}

}  // namespace ringlet::trainer::cli
