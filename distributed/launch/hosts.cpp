// launch_hosts: node launchers over ssh, node 0 in this process. The ssh children inherit this
// process's stdout and stderr (their lines are already rank-prefixed by the remote launchers);
// when node 0 fails they are stopped (SIGTERM, then SIGKILL), so nothing is left running here.
#include "distributed/launch/hosts.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/env.h"
#include "core/error.h"

namespace ringlet::distributed {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kStopGrace = std::chrono::seconds(5);

std::vector<std::string> split_words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

pid_t spawn(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  RINGLET_CHECK(pid >= 0, Error, "launch --hosts: fork: ", std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);  // its own group: a SIGINT at the terminal reaches node 0's launcher only
    ::execvp(args[0], args.data());
    std::fprintf(stderr, "ringlet launch: cannot run '%s': %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  return pid;
}

// Exit status of a finished child (128 + signal when it was killed), or -1 if still running.
int reap(pid_t pid, bool block) {
  int status = 0;
  const pid_t r = ::waitpid(pid, &status, block ? 0 : WNOHANG);
  if (r == 0) return -1;
  if (r < 0) return 255;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

std::vector<std::string> parse_host_list(const std::string& list) {
  std::vector<std::string> hosts;
  std::size_t at = 0;
  while (at <= list.size()) {
    const std::size_t comma = std::min(list.find(',', at), list.size());
    const std::string host = list.substr(at, comma - at);
    RINGLET_CHECK(!host.empty(), ValueError, "launch --hosts '", list,
                  "': an empty host name (write h1,h2,...)");
    hosts.push_back(host);
    at = comma + 1;
  }
  return hosts;
}

std::vector<std::string> read_hostfile(const std::string& path) {
  std::ifstream file(path);
  RINGLET_CHECK(file.good(), ValueError, "launch --hostfile: cannot read '", path, "'");
  std::vector<std::string> hosts;
  for (std::string line; std::getline(file, line);) {
    line = line.substr(0, line.find('#'));
    const auto words = split_words(line);
    RINGLET_CHECK(words.size() <= 1, ValueError, "launch --hostfile ", path,
                  ": one host per line, got '", line, "'");
    if (!words.empty()) hosts.push_back(words[0]);
  }
  RINGLET_CHECK(!hosts.empty(), ValueError, "launch --hostfile ", path, ": lists no host");
  return hosts;
}

std::string shell_quote(const std::string& word) {
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string remote_launch_command(const LaunchOptions& o, const HostsOptions& hosts, int node_rank,
                                  const std::vector<std::string>& command) {
  std::ostringstream s;
  s << "cd " << shell_quote(std::filesystem::current_path().string()) << " && exec "
    << shell_quote(hosts.ringlet) << " launch --nnodes " << hosts.hosts.size() << " --node-rank "
    << node_rank << " --nproc-per-node " << o.nproc_per_node << " --master-addr "
    << shell_quote(o.master_addr) << " --master-port " << o.master_port << " --rdzv-timeout "
    << o.rdzv_timeout.count() << " --rdzv-id " << shell_quote(o.run_id)
    << (o.quiet_others ? " --quiet-others" : "");
  if (!o.log_dir.empty()) {
    s << " --log-dir " << shell_quote(o.log_dir) << " --tee " << o.tee << " --redirects "
      << o.redirects;
  }
  s << " --";
  for (const auto& word : command) s << " " << shell_quote(word);
  return s.str();
}

int launch_hosts(LaunchOptions options, const HostsOptions& given,
                 const std::vector<std::string>& command, std::ostream& out, std::ostream& err) {
  HostsOptions hosts = given;
  RINGLET_CHECK(!hosts.hosts.empty(), ValueError, "launch --hosts: no host given");
  if (hosts.ssh.empty()) {
    hosts.ssh = core::env_string("RINGLET_SSH").value_or("ssh -o BatchMode=yes");
  }
  if (hosts.ringlet.empty()) hosts.ringlet = std::filesystem::read_symlink("/proc/self/exe");
  options.nnodes = static_cast<int>(hosts.hosts.size());
  options.node_rank = 0;
  if (options.master_addr == LaunchOptions().master_addr) options.master_addr = hosts.hosts[0];
  if (options.master_port == 0) options.master_port = free_port();

  std::vector<pid_t> nodes;
  for (int node = 1; node < options.nnodes; ++node) {
    std::vector<std::string> argv = split_words(hosts.ssh);
    RINGLET_CHECK(!argv.empty(), ValueError, "RINGLET_SSH is empty");
    argv.push_back(hosts.hosts[node]);
    argv.push_back(remote_launch_command(options, hosts, node, command));
    err << "ringlet launch: node " << node << " on " << hosts.hosts[node] << " via " << hosts.ssh
        << std::endl;
    nodes.push_back(spawn(argv));
  }
  // Waits for the other nodes (after SIGTERM when `stop`), reporting each failure; returns the
  // first failing node's status.
  auto finish_nodes = [&](bool stop, Clock::time_point deadline) {
    if (stop) {
      for (pid_t pid : nodes) ::kill(-pid, SIGTERM);
    }
    int first_failure = 0;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      int node_status = reap(nodes[i], false);
      while (node_status < 0 && Clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        node_status = reap(nodes[i], false);
      }
      if (node_status < 0) {
        ::kill(-nodes[i], SIGKILL);
        node_status = reap(nodes[i], true);
      }
      if (node_status != 0 && first_failure == 0) first_failure = node_status;
      if (node_status != 0 && !(stop && node_status == 128 + SIGTERM)) {
        err << "ringlet launch: node " << i + 1 << " (" << hosts.hosts[i + 1]
            << ") failed with exit code " << node_status << std::endl;
      }
    }
    return first_failure;
  };
  int status = 0;
  try {
    status = launch(options, command, out, err);
  } catch (...) {
    finish_nodes(true, Clock::now() + kStopGrace);
    throw;
  }
  // Node 0 is done. On its failure the others are stopped; on success they finish on their own
  // (their workers already passed the job's last collective).
  const int first_failure =
      finish_nodes(status != 0, Clock::now() + (status != 0 ? kStopGrace : options.rdzv_timeout));
  return status != 0 ? status : first_failure;
}

}  // namespace ringlet::distributed
