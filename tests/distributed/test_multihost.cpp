// Two "hosts" on one machine: two network namespaces joined by a veth pair (10.77.0.1 and
// 10.77.0.2). Processes in different namespaces count as different hosts (host_identity), so
// ranks across them connect over tcp and ranks within one over shm. One training job spans
// them, started (1) by a node launcher run in each namespace, and (2) by `ringlet launch
// --hosts` in the first, which reaches the second through tests/helpers/netns_ssh.sh in place of
// ssh; (3) all_reduce_perf on 2 x 2 ranks runs the hierarchical all-reduce, chosen by itself.
// Creating namespaces needs root (CAP_NET_ADMIN); without it this executable prints why and exits
// 77, which meson reports as SKIP.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>

#include "ringlet_command.h"

namespace fs = std::filesystem;
using namespace ringlet::testing;

namespace {

std::string g_ns[2];  // the namespaces of host 0 and host 1

const char* const kAddr[2] = {"10.77.0.1", "10.77.0.2"};

int sh(const std::string& command) {
  const int status = std::system((command + " >/dev/null 2>&1").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

bool make_namespaces() {
  const std::string id = std::to_string(::getpid());
  g_ns[0] = "rgla" + id;
  g_ns[1] = "rglb" + id;
  const std::string va = "rgva" + id, vb = "rgvb" + id;
  return sh("ip netns add " + g_ns[0]) == 0 && sh("ip netns add " + g_ns[1]) == 0 &&
         sh("ip link add " + va + " type veth peer name " + vb) == 0 &&
         sh("ip link set " + va + " netns " + g_ns[0]) == 0 &&
         sh("ip link set " + vb + " netns " + g_ns[1]) == 0 &&
         sh("ip -n " + g_ns[0] + " addr add " + kAddr[0] + "/24 dev " + va) == 0 &&
         sh("ip -n " + g_ns[1] + " addr add " + kAddr[1] + "/24 dev " + vb) == 0 &&
         sh("ip -n " + g_ns[0] + " link set " + va + " up") == 0 &&
         sh("ip -n " + g_ns[1] + " link set " + vb + " up") == 0 &&
         sh("ip -n " + g_ns[0] + " link set lo up") == 0 &&
         sh("ip -n " + g_ns[1] + " link set lo up") == 0;
}

void remove_namespaces() {
  for (const auto& ns : g_ns) {
    if (!ns.empty()) sh("ip netns del " + ns);  // takes its end of the veth pair along
  }
}

// Runs `command` in host `host`'s namespace (bounded by timeout), output captured.
FILE* start_in(int host, const std::string& command) {
  return start_command("ip netns exec " + g_ns[host] + " timeout 120 env " + command);
}

// One job over both namespaces: a node launcher in each (`launch_args` added to both), each
// running `command`; both must exit 0. Returns node 0's and node 1's output.
std::pair<CommandResult, CommandResult> run_two_nodes(const std::string& launch_args,
                                                      const std::string& command) {
  const std::string common = "'" + ringlet_binary() +
                             "' launch --nnodes 2 --master-addr 10.77.0.1 --rdzv-timeout 60 " +
                             launch_args + " ";
  FILE* node1 = start_in(1, common + "--node-rank 1 -- " + command);
  FILE* node0 = start_in(0, common + "--node-rank 0 -- " + command);
  CommandResult node0_result = finish_command(node0);
  CommandResult node1_result = finish_command(node1);
  INFO("node 0:\n", node0_result.output, "\nnode 1:\n", node1_result.output);
  CHECK(node0_result.status == 0);
  CHECK(node1_result.status == 0);
  return {std::move(node0_result), std::move(node1_result)};
}

std::string train_args(const fs::path& out) {
  return "'" + ringlet_binary() +
         "' train --epochs 1 --limit-train 512 --limit-test 100 --workers 1 --threads 1 --out '" +
         out.string() + "'";
}

}  // namespace

TEST_CASE("two node launchers, one per network namespace, train one job over tcp") {
  const fs::path out =
      fs::temp_directory_path() / ("ringlet_multihost_" + std::to_string(::getpid()));
  const auto nodes = run_two_nodes("--nproc-per-node 1 --master-port 29400", train_args(out));
  const CommandResult &node0_result = nodes.first, &node1_result = nodes.second;
  INFO("node 0:\n", node0_result.output, "\nnode 1:\n", node1_result.output);
  CHECK(contains(node0_result.output, "[rank 0] done: 1 epoch(s) on 2 ranks"));
  CHECK(contains(node0_result.output, "listening on 10.77.0.1:"));
  CHECK(contains(node1_result.output, "listening on 10.77.0.2:"));
  CHECK(contains(node0_result.output, "peers: 1:tcp"));
  fs::remove_all(out);
}

TEST_CASE("ringlet launch --hosts starts the other node through ssh (a namespace stand-in)") {
  const fs::path out = fs::temp_directory_path() / ("ringlet_hosts_" + std::to_string(::getpid()));
  const std::string ssh = std::string(RINGLET_SOURCE_ROOT) + "/tests/helpers/netns_ssh.sh";
  const std::string env =
      "RINGLET_SSH='" + ssh + "' RINGLET_TEST_NETNS='" + kAddr[1] + "=" + g_ns[1] + "' ";
  CommandResult result = finish_command(
      start_in(0, env + "'" + ringlet_binary() + "' launch --hosts " + kAddr[0] + "," + kAddr[1] +
                      " --nproc-per-node 1 --rdzv-timeout 60 -- " + train_args(out)));
  INFO(result.output);
  CHECK(result.status == 0);
  CHECK(contains(result.output, "node 1 on 10.77.0.2 via " + ssh));
  CHECK(contains(result.output, "[rank 0] done: 1 epoch(s) on 2 ranks"));
  CHECK(contains(result.output, "rank 1: listening on 10.77.0.2:"));

  // A host the stand-in cannot reach: ssh's failure is reported with the node and host.
  result =
      finish_command(start_in(0, env + "'" + ringlet_binary() + "' launch --hosts " + kAddr[0] +
                                     ",10.77.0.9 --nproc-per-node 1 --rdzv-timeout 3 -- true"));
  CHECK(result.status != 0);
  CHECK(contains(result.output, "netns_ssh: no network namespace for host '10.77.0.9'"));
  CHECK(contains(result.output, "node 1 (10.77.0.9) failed with exit code 255"));
  fs::remove_all(out);
}

TEST_CASE("2 hosts x 2 ranks: shm within a host, tcp across, the hierarchical all-reduce") {
  // 1 MiB in one piece, 16 MiB pipelined in four (the host ring on a second thread).
  const fs::path perf =
      fs::path(ringlet_binary()).parent_path().parent_path() / "bench" / "all_reduce_perf";
  const auto nodes = run_two_nodes("--nproc-per-node 2 --master-port 29401 --quiet-others",
                                   "'" + perf.string() + "' -b 1M -e 16M -f 16 -n 3 -w 1");
  const CommandResult &node0_result = nodes.first, &node1_result = nodes.second;
  INFO("node 0:\n", node0_result.output, "\nnode 1:\n", node1_result.output);
  CHECK(contains(node0_result.output, "peers: 1:shm 2:tcp 3:tcp"));
  CHECK(contains(node0_result.output, "# Algorithm: hierarchical (1 MiB - 16 MiB)"));
  const auto occurrences = [&](const std::string& what) {
    int n = 0;
    for (auto at = node0_result.output.find(what); at != std::string::npos;
         at = node0_result.output.find(what, at + 1)) {
      ++n;
    }
    return n;
  };
  CHECK(occurrences("\"size\":16777216") == 1);
  CHECK(occurrences("\"ip_wrong\":0") == 2);  // both sizes right
  CHECK(occurrences("\"oop_wrong\":0") == 2);
  CHECK(contains(node0_result.output, "\"transport\":\"shm+tcp\""));
}

int main(int argc, char** argv) {
  if (!make_namespaces()) {
    remove_namespaces();
    std::printf(
        "skipped: cannot create network namespaces and a veth pair (needs root with "
        "CAP_NET_ADMIN and the ip tool)\n");
    return 77;
  }
  doctest::Context context(argc, argv);
  const int result = context.run();
  remove_namespaces();
  return result;
}
