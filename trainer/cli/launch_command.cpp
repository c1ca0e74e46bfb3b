// `ringlet launch`: flags as in torchrun (--nproc-per-node or --nproc_per_node, "--flag value"
// or "--flag=value"); the first word that is not a flag, or everything after `--`, is the
// command. Bad flags are UsageErrors with the nearest valid flag; the work is launcher.cpp's.
#include "trainer/cli/launch_command.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "core/env.h"
#include "device/runtime.h"
#include "distributed/launch/hosts.h"
#include "distributed/launch/launcher.h"
#include "distributed/launch/worker_logs.h"
#include "trainer/cli/usage.h"

namespace ringlet::trainer::cli {

namespace {

constexpr const char* kLaunchHelp =
    "usage: ringlet launch [options] [--] script.py|command [args...]\n"
    "\n"
    "Runs nproc-per-node workers as torchrun does: a script.py with python (RINGLET_PYTHON,\n"
    "else torchrun's PYTHON_EXEC, else python3 from PATH; the launcher says which), -m module\n"
    "likewise, any other command as it is (found in PATH).\n"
    "Workers get torchrun's environment: RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,\n"
    "GROUP_RANK, GROUP_WORLD_SIZE, ROLE_NAME, ROLE_RANK, ROLE_WORLD_SIZE, MASTER_ADDR,\n"
    "MASTER_PORT (a free port, left to the job: a torch.distributed script's rank 0 hosts\n"
    "its store there), TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_MAX_RESTARTS,\n"
    "TORCHELASTIC_RUN_ID, TORCHELASTIC_USE_AGENT_STORE=False, and OMP_NUM_THREADS=1 when it\n"
    "is unset and several workers share the node; plus ringlet's own: RINGLET_STORE_ADDR and\n"
    "RINGLET_STORE_PORT (ringlet's store, hosted by node 0's launcher), RINGLET_JOB_TOKEN,\n"
    "RINGLET_STORE_HOSTED=1, RINGLET_RESTART_COUNT and RINGLET_RDZV_TIMEOUT (seconds).\n"
    "Each output line is prefixed with \"[rank R] \". SIGINT and SIGTERM are forwarded to the\n"
    "workers. When a worker fails, the others are stopped (SIGTERM, then SIGKILL) and all are\n"
    "restarted while restarts remain (restarted `ringlet train` workers continue from the\n"
    "checkpoint in their --out directory); otherwise the exit status is the failing worker's\n"
    "(128 + N for signal N). Once a worker has exited 0, the others must exit within\n"
    "RINGLET_TIMEOUT ms (default 10 minutes); one still running then counts as failed.\n"
    "\n"
    "options (underscores work too: --nproc_per_node):\n"
    "  --nproc-per-node N   workers on this node: a number (1-256), cpu (one per core), gpu\n"
    "                       (one per GPU) or auto (gpu when there are GPUs, else cpu);\n"
    "                       default 1\n"
    "  --nnodes M           nodes, one launcher each (default 1; with M > 1 give every node\n"
    "                       the same --master-addr and --master-port and its own --node-rank)\n"
    "  --node-rank R        this node's index in [0, M) (default 0)\n"
    "  --master-addr A      node 0's address, where ringlet's store listens (default 127.0.0.1)\n"
    "  --master-port P      ringlet's store's port (default 0: a free port, single node only)\n"
    "  --standalone         one node, store on a free local port (torchrun's --standalone)\n"
    "  --rdzv-backend B     static (the default: --master-addr/--master-port) or c10d\n"
    "  --rdzv-endpoint H[:P]  with c10d: where the store listens (port default 29400)\n"
    "  --rdzv-id ID         the job's id, TORCHELASTIC_RUN_ID (default none)\n"
    "  --max-restarts K     restart all workers up to K times after a failure (default 0;\n"
    "                       single node only)\n"
    "  --rdzv-timeout S     seconds the node launchers wait for each other (default 600)\n"
    "  --no-python          run the command as it is, even a .py file\n"
    "  -m, --module         the command is a python module: python -u -m module args...\n"
    "  --log-dir DIR        per-rank log files: DIR/<rdzv-id>_<random>/attempt_<k>/<local\n"
    "                       rank>/stdout.log and stderr.log (alone: both streams, also shown)\n"
    "  -t, --tee S          streams written to the log files and shown: 0 none, 1 stdout,\n"
    "                       2 stderr, 3 both\n"
    "  -r, --redirects S    streams written to the log files only (not shown), as --tee\n"
    "  --hosts h1,h2,...    one node per host: node 0 here (this machine is h1), the others\n"
    "                       started over ssh (RINGLET_SSH, default \"ssh -o BatchMode=yes\") in\n"
    "                       this directory with this ringlet binary; master-addr defaults to h1\n"
    "  --hostfile FILE      the same, one host per line\n"
    "  --quiet-others       show rank 0's output only (and a failed rank's last stderr lines)\n"
    "  -h, --help           show this help\n";

const std::vector<std::string> kValueFlags = {
    "--nproc-per-node", "--nnodes",       "--node-rank", "--master-addr", "--master-port",
    "--max-restarts",   "--rdzv-timeout", "--hosts",     "--hostfile",    "--rdzv-backend",
    "--rdzv-endpoint",  "--rdzv-id",      "--tee",       "--redirects",   "--log-dir",
};
const std::vector<std::string> kSwitches = {"--quiet-others", "--standalone", "--no-python",
                                            "--module"};
constexpr int kC10dDefaultPort = 29400;  // torchrun's default rendezvous port

std::vector<std::string> all_flags() {
  std::vector<std::string> flags = kValueFlags;
  flags.insert(flags.end(), kSwitches.begin(), kSwitches.end());
  flags.push_back("--help");
  return flags;
}

bool one_of(const std::vector<std::string>& list, const std::string& word) {
  return std::find(list.begin(), list.end(), word) != list.end();
}

// torchrun spells its flags with underscores (--nproc_per_node) and accepts dashes too, and has
// three short ones.
std::string normalize(std::string flag) {
  if (flag == "-t") return "--tee";
  if (flag == "-r") return "--redirects";
  if (flag == "-m") return "--module";
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

// torchrun's --nproc-per-node: a number, or cpu / gpu / auto.
int nproc_flag(const std::string& value) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int n = 0;
  if (value == "cpu") {
    n = cores;
  } else if (value == "gpu") {
    n = device::usable_gpu_count();
    if (n == 0) throw UsageError("launch: --nproc-per-node gpu: this machine has no usable GPU");
  } else if (value == "auto") {
    const int gpus = device::usable_gpu_count();
    n = gpus > 0 ? gpus : cores;
  } else {
    return int_flag("--nproc-per-node", value, 1, distributed::kMaxWorkersPerNode);
  }
  if (n > distributed::kMaxWorkersPerNode) {
    throw UsageError(core::str("launch: --nproc-per-node ", value, " means ", n,
                               " workers, more than the ", distributed::kMaxWorkersPerNode,
                               " a node may run; give a number"));
  }
  return n;
}

// --tee / --redirects: 0-3 for every rank (torchrun's per-rank "0:1,1:2" form is refused).
int streams_flag(const std::string& flag, const std::string& value) {
  if (value.find(':') != std::string::npos) {
    throw UsageError("launch: " + flag + " " + value +
                     ": a value per local rank is not supported; give one of 0-3 for all ranks");
  }
  if (value.size() != 1 || value[0] < '0' || value[0] > '3') {
    throw UsageError("launch: " + flag + " expects 0 (none), 1 (stdout), 2 (stderr) or 3 (both), " +
                     "got '" + value + "'");
  }
  return value[0] - '0';
}

// What the command line says, before the flags that depend on each other are combined.
struct LaunchArgs {
  distributed::LaunchOptions options;
  distributed::HostsOptions hosts;
  bool help = false;
  bool node_flags = false;  // --nnodes / --node-rank, which a host list replaces
  bool standalone = false, no_python = false, module = false;
  bool streams_given = false;  // --tee or --redirects
  std::string rdzv_backend = "static";
  std::string rdzv_endpoint;
  std::vector<std::string> command;
};

void set_flag(LaunchArgs& a, const std::string& flag, std::string value) {
  distributed::LaunchOptions& o = a.options;
  if (flag == "--nproc-per-node") {
    o.nproc_per_node = nproc_flag(value);
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
    o.rdzv_timeout =
        std::chrono::seconds(int_flag(flag, value, 1, distributed::kMaxRdzvTimeoutSeconds));
  } else if (flag == "--rdzv-backend") {
    if (value != "static" && value != "c10d") {
      throw UsageError("launch: --rdzv-backend " + value +
                       " is not supported: static (the default) or c10d");
    }
    a.rdzv_backend = value;
  } else if (flag == "--rdzv-endpoint") {
    a.rdzv_endpoint = value;
  } else if (flag == "--rdzv-id") {
    if (value.empty() || value.find('/') != std::string::npos) {
      throw UsageError("launch: --rdzv-id '" + value + "' must be a non-empty name without '/'");
    }
    o.run_id = value;
  } else if (flag == "--tee" || flag == "--redirects") {
    (flag == "--tee" ? o.tee : o.redirects) = streams_flag(flag, value);
    a.streams_given = true;
  } else if (flag == "--log-dir") {
    if (value.empty()) throw UsageError("launch: --log-dir is empty");
    o.log_dir = value;
  } else if (flag == "--hosts" || flag == "--hostfile") {
    try {
      a.hosts.hosts = flag == "--hosts" ? distributed::parse_host_list(value)
                                        : distributed::read_hostfile(value);
    } catch (const core::ValueError& e) {
      throw UsageError(e.what());
    }
  }
  a.node_flags = a.node_flags || flag == "--nnodes" || flag == "--node-rank";
}

void set_switch(LaunchArgs& a, const std::string& flag) {
  if (flag == "--quiet-others") a.options.quiet_others = true;
  if (flag == "--standalone") a.standalone = true;
  if (flag == "--no-python") a.no_python = true;
  if (flag == "--module") a.module = true;
}

LaunchArgs parse_launch_args(const std::vector<std::string>& args) {
  LaunchArgs a;
  a.options.rdzv_timeout = distributed::default_rdzv_timeout();
  std::size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') break;  // the command starts here
    if (arg == "-h" || arg == "--help") {
      a.help = true;
      return a;
    }
    const std::size_t eq = arg.find('=');
    const std::string flag = normalize(arg.substr(0, eq));
    if (one_of(kSwitches, flag)) {
      if (eq != std::string::npos) throw UsageError("launch: " + flag + " takes no value");
      set_switch(a, flag);
      continue;
    }
    if (!one_of(kValueFlags, flag)) throw_unknown("launch", "option", flag, all_flags());
    if (eq == std::string::npos && i + 1 >= args.size()) {
      throw UsageError("launch: " + flag + " needs a value");
    }
    set_flag(a, flag, eq != std::string::npos ? arg.substr(eq + 1) : args[++i]);
  }
  a.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  return a;
}

// --standalone and --rdzv-backend c10d say where the store listens, as torchrun reads them.
void apply_rendezvous(LaunchArgs& a) {
  distributed::LaunchOptions& o = a.options;
  if (a.standalone) {
    if (o.nnodes > 1) throw UsageError("launch: --standalone runs one node; drop --nnodes");
    o.master_addr = "127.0.0.1";
    o.master_port = 0;
    if (o.run_id == "none") o.run_id = core::str("standalone_", distributed::free_port());
    return;
  }
  if (a.rdzv_backend == "static") {
    if (!a.rdzv_endpoint.empty()) {
      throw UsageError(
          "launch: --rdzv-endpoint is for --rdzv-backend c10d; the static "
          "backend listens at --master-addr:--master-port");
    }
    return;
  }
  if (a.rdzv_endpoint.empty()) {
    throw UsageError("launch: --rdzv-backend c10d needs --rdzv-endpoint host[:port]");
  }
  const auto colon = a.rdzv_endpoint.rfind(':');
  const bool has_port =
      colon != std::string::npos && a.rdzv_endpoint.find(']', colon) == std::string::npos;
  std::string host = has_port ? a.rdzv_endpoint.substr(0, colon) : a.rdzv_endpoint;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host.empty())
    throw UsageError("launch: --rdzv-endpoint '" + a.rdzv_endpoint + "' has no host");
  o.master_addr = host;
  o.port_name = "--rdzv-endpoint port";
  o.master_port =
      has_port ? int_flag("--rdzv-endpoint port", a.rdzv_endpoint.substr(colon + 1), 1, 65535)
               : kC10dDefaultPort;
  if (o.nnodes > 1 && !a.node_flags) {
    throw UsageError(
        "launch: with --nnodes > 1 every node needs its --node-rank (ringlet's c10d "
        "rendezvous does not assign them)");
  }
}

// The python for script.py and -m: RINGLET_PYTHON, else torchrun's PYTHON_EXEC, else python3,
// as a full path where PATH finds it (so the launcher can say which one ran).
std::string python_interpreter() {
  std::string python = core::env_string("RINGLET_PYTHON")
                           .value_or(core::env_string("PYTHON_EXEC").value_or("python3"));
  if (python.find('/') != std::string::npos) return python;
  const std::string path = core::env_string("PATH").value_or("/usr/bin:/bin");
  for (std::size_t start = 0; start <= path.size();) {
    const std::size_t end = std::min(path.find(':', start), path.size());
    const std::filesystem::path candidate =
        std::filesystem::path(path.substr(start, end - start)) / python;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
    start = end + 1;
  }
  return python;
}

// A .py script and -m module run under python, as torchrun runs them; --no-python runs the
// command itself.
std::vector<std::string> worker_command(const LaunchArgs& a) {
  if (a.command.empty()) {
    throw UsageError(
        "launch: missing the command to run (ringlet launch [options] script.py|command ...)");
  }
  if (a.no_python && a.module) throw UsageError("launch: --no-python and -m cannot go together");
  const std::string& first = a.command.front();
  const bool script = first.size() > 3 && first.compare(first.size() - 3, 3, ".py") == 0;
  if (a.no_python || (!a.module && !script)) return a.command;
  std::vector<std::string> command{python_interpreter(), "-u"};
  if (a.module) command.push_back("-m");
  command.insert(command.end(), a.command.begin(), a.command.end());
  return command;
}

// The per-rank log files: --log-dir alone writes and shows both streams.
void apply_logs(LaunchArgs& a) {
  distributed::LaunchOptions& o = a.options;
  if (o.log_dir.empty()) {
    if (a.streams_given && (o.tee | o.redirects) != 0) {
      throw UsageError("launch: --tee and --redirects write per-rank files: give --log-dir DIR");
    }
    return;
  }
  if (!a.streams_given) o.tee = distributed::kStdout | distributed::kStderr;
}

}  // namespace

int launch_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  LaunchArgs a = parse_launch_args(args);
  if (a.help) {
    out << kLaunchHelp;
    return 0;
  }
  apply_rendezvous(a);
  apply_logs(a);
  const std::vector<std::string> command = worker_command(a);
  distributed::LaunchOptions& options = a.options;
  options.omp_one_thread = true;
  if (command.front() != a.command.front()) {  // a script.py or -m module, run under python
    options.python = command.front();
    err << "ringlet launch: running " << a.command.front() << " with " << options.python
        << std::endl;
  }
  if (!a.hosts.hosts.empty()) {
    if (a.node_flags) {
      throw UsageError("launch: --hosts/--hostfile set the nodes; drop --nnodes and --node-rank");
    }
    if (options.max_restarts > 0) {
      throw UsageError("launch: --max-restarts with several hosts is not supported yet");
    }
    return distributed::launch_hosts(options, a.hosts, command, out, err);
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
  return distributed::launch(options, command, out, err);
}

}  // namespace ringlet::trainer::cli
