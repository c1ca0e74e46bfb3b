// Discovery tests: each launcher's environment (torchrun, Slurm, Open MPI), explicit tcp:// and
// file:// init, and each kind of bad value. The environment is an injected map, so nothing here
// touches the process environment or opens a socket.
#include <doctest/doctest.h>

#include <cstdlib>
#include <map>

#include "core/error.h"
#include "transport/discovery.h"
#include "transport/tcp/interfaces.h"

using namespace ringlet;
using namespace ringlet::transport;

namespace {

using Vars = std::map<std::string, std::string>;

EnvLookup env_of(Vars vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

InitInfo from(const Vars& vars, InitOptions options = {}) {
  return discover(options, env_of(vars));
}

doctest::Contains contains(const std::string& text) { return doctest::Contains(text.c_str()); }

// Asserts discover() throws a ValueError whose message contains every fragment.
void check_error(const Vars& vars, const std::vector<std::string>& fragments,
                 InitOptions options = {}) {
  try {
    from(vars, options);
    FAIL("discover() accepted a bad configuration");
  } catch (const core::ValueError& e) {
    const std::string msg = e.what();
    for (const auto& f : fragments) {
      INFO("message: ", msg);
      CHECK(msg.find(f) != std::string::npos);
    }
  }
}

const Vars kTorchrun = {
    {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}, {"RANK", "3"},
    {"WORLD_SIZE", "8"},         {"LOCAL_RANK", "1"},      {"LOCAL_WORLD_SIZE", "4"}};

Vars with(Vars base, const Vars& changes, const std::vector<std::string>& remove = {}) {
  for (const auto& [k, v] : changes) base[k] = v;
  for (const auto& k : remove) base.erase(k);
  return base;
}

}  // namespace

TEST_CASE("discovery: torchrun variables, with env:// or no init method") {
  for (const std::string method : {"", "env://"}) {
    InitOptions o;
    o.init_method = method;
    const auto info = from(kTorchrun, o);
    CHECK(info.source == "env");
    CHECK(info.rank == 3);
    CHECK(info.world_size == 8);
    CHECK(info.local_rank == 1);
    CHECK(info.local_world_size == 4);
    CHECK(info.master_addr == "10.0.0.1");
    CHECK(info.master_port == 29500);
  }
  // Explicit rank and world size win over the environment.
  InitOptions o;
  o.rank = 0;
  o.world_size = 2;
  const auto info = from(with(kTorchrun, {}, {"LOCAL_RANK", "LOCAL_WORLD_SIZE"}), o);
  CHECK(info.rank == 0);
  CHECK(info.world_size == 2);
  CHECK(info.local_rank == 0);  // no local variables: alone on the host
  CHECK(info.local_world_size == 1);
  // Only the master, with explicit ranks.
  CHECK(from({{"MASTER_ADDR", "[::1]"}, {"MASTER_PORT", "1"}}, o).master_addr == "::1");
}

TEST_CASE("discovery: under ringlet launch the store is at RINGLET_STORE_ADDR:PORT, not MASTER_*") {
  const auto info =
      from(with(kTorchrun, {{"RINGLET_STORE_ADDR", "127.0.0.1"}, {"RINGLET_STORE_PORT", "40001"}}));
  CHECK(info.master_addr == "127.0.0.1");
  CHECK(info.master_port == 40001);  // MASTER_PORT (29500) is the job's
  check_error(with(kTorchrun, {{"RINGLET_STORE_PORT", "40001"}}),
              {"missing environment variable RINGLET_STORE_ADDR"});
  check_error(with(kTorchrun, {{"RINGLET_STORE_ADDR", "h"}, {"RINGLET_STORE_PORT", "0"}}),
              {"RINGLET_STORE_PORT='0' is out of range"});
}

TEST_CASE("discovery: bad torchrun values name the variable and the value") {
  check_error(with(kTorchrun, {}, {"MASTER_PORT"}), {"MASTER_PORT", "missing"});
  check_error(with(kTorchrun, {}, {"MASTER_ADDR"}), {"MASTER_ADDR", "missing"});
  check_error(with(kTorchrun, {}, {"WORLD_SIZE"}), {"WORLD_SIZE", "missing"});
  check_error(with(kTorchrun, {{"RANK", "x"}}), {"RANK='x'", "not an integer"});
  check_error(with(kTorchrun, {{"RANK", "3abc"}}), {"RANK='3abc'"});
  check_error(with(kTorchrun, {{"RANK", ""}}), {"RANK=''"});
  check_error(with(kTorchrun, {{"RANK", " 3"}}), {"RANK=' 3'"});
  check_error(with(kTorchrun, {{"RANK", "99999999999999999999"}}), {"RANK='99999999999999999999'"});
  check_error(with(kTorchrun, {{"RANK", "8"}}), {"RANK='8'", "out of range", "WORLD_SIZE=8"});
  check_error(with(kTorchrun, {{"RANK", "-1"}}), {"RANK='-1'", "out of range"});
  check_error(with(kTorchrun, {{"WORLD_SIZE", "0"}}), {"WORLD_SIZE='0'", "out of range"});
  check_error(with(kTorchrun, {{"MASTER_PORT", "70000"}}), {"MASTER_PORT='70000'", "[1, 65535]"});
  check_error(with(kTorchrun, {{"MASTER_PORT", "0"}}), {"MASTER_PORT='0'"});
  check_error(with(kTorchrun, {{"MASTER_PORT", "http"}}), {"MASTER_PORT='http'"});
  check_error(with(kTorchrun, {{"MASTER_ADDR", ""}}), {"MASTER_ADDR=''"});
  check_error(with(kTorchrun, {{"LOCAL_RANK", "4"}}), {"LOCAL_RANK='4'", "LOCAL_WORLD_SIZE=4"});
  check_error(with(kTorchrun, {{"LOCAL_WORLD_SIZE", "16"}}), {"LOCAL_WORLD_SIZE='16'"});
  InitOptions o;
  o.rank = 9;
  check_error(kTorchrun, {"InitOptions::rank='9'", "out of range"}, o);
  check_error({}, {"RANK", "no launcher"});  // nothing at all
}

const Vars kSlurm = {{"SLURM_PROCID", "5"},      {"SLURM_NTASKS", "8"},
                     {"SLURM_LOCALID", "1"},     {"SLURM_NODELIST", "node[01-03,07],gpu5"},
                     {"SLURM_JOB_ID", "123456"}, {"SLURM_TASKS_PER_NODE", "2(x3),2"},
                     {"SLURM_NODEID", "3"}};

TEST_CASE("discovery: Slurm variables, node list and MASTER_ADDR override") {
  auto info = from(kSlurm);
  CHECK(info.source == "slurm");
  CHECK(info.rank == 5);
  CHECK(info.world_size == 8);
  CHECK(info.local_rank == 1);
  CHECK(info.local_world_size == 2);
  CHECK(info.master_addr == "node01");
  CHECK(info.master_port == 29500 + 456);  // derived from the job id when MASTER_PORT is unset
  info = from(with(kSlurm, {{"MASTER_ADDR", "login7"}, {"MASTER_PORT", "4000"}}));
  CHECK(info.master_addr == "login7");
  CHECK(info.master_port == 4000);
  info = from(with(kSlurm, {{"SLURM_NTASKS_PER_NODE", "4"}, {"SLURM_JOB_NODELIST", "a,b"}},
                   {"SLURM_NODELIST"}));
  CHECK(info.local_world_size == 4);
  CHECK(info.master_addr == "a");

  check_error(with(kSlurm, {}, {"SLURM_NODELIST"}), {"SLURM_NODELIST", "MASTER_ADDR"});
  check_error(with(kSlurm, {}, {"SLURM_JOB_ID"}), {"SLURM_JOB_ID", "MASTER_PORT"});
  check_error(with(kSlurm, {{"SLURM_PROCID", "abc"}}), {"SLURM_PROCID='abc'"});
  check_error(with(kSlurm, {{"SLURM_PROCID", "8"}}), {"SLURM_PROCID='8'", "SLURM_NTASKS=8"});
  check_error(with(kSlurm, {{"SLURM_NTASKS", "many"}}), {"SLURM_NTASKS='many'"});
  check_error(with(kSlurm, {{"SLURM_NODELIST", "node[01-03"}}), {"SLURM_NODELIST='node[01-03'"});
  check_error(with(kSlurm, {{"SLURM_TASKS_PER_NODE", "2(x"}}), {"SLURM_TASKS_PER_NODE"});
}

TEST_CASE("discovery: slurm_first_host expands node lists") {
  CHECK(slurm_first_host("node[01-03,07],gpu5") == "node01");
  CHECK(slurm_first_host("a,b") == "a");
  CHECK(slurm_first_host("host") == "host");
  CHECK(slurm_first_host("gpu[7]") == "gpu7");
  CHECK(slurm_first_host("rack[2-3]-node[08,09]") == "rack2-node08");
  CHECK(slurm_first_host("n[0010-0020],x[1-2]") == "n0010");
  for (const std::string bad : {"", "node[01-03", "node[]", "node[a-b]", "x]", "a[1[2]]", ",a"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(slurm_first_host(bad), contains("SLURM_NODELIST='" + bad + "'"),
                         core::ValueError);
  }
}

const Vars kOmpi = {{"OMPI_COMM_WORLD_RANK", "2"},
                    {"OMPI_COMM_WORLD_SIZE", "4"},
                    {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                    {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                    {"MASTER_ADDR", "h0"},
                    {"MASTER_PORT", "1234"}};

TEST_CASE("discovery: Open MPI variables") {
  auto info = from(kOmpi);
  CHECK(info.source == "ompi");
  CHECK(info.rank == 2);
  CHECK(info.world_size == 4);
  CHECK(info.local_rank == 0);
  CHECK(info.local_world_size == 2);
  CHECK(info.master_addr == "h0");
  CHECK(info.master_port == 1234);
  // All ranks on this host: the store host defaults to loopback.
  info = from(with(kOmpi, {{"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}}, {"MASTER_ADDR"}));
  CHECK(info.master_addr == "127.0.0.1");
  check_error(with(kOmpi, {}, {"MASTER_ADDR"}), {"MASTER_ADDR", "missing"});
  check_error(with(kOmpi, {}, {"MASTER_PORT"}), {"MASTER_PORT", "missing"});
  check_error(with(kOmpi, {{"OMPI_COMM_WORLD_RANK", "4"}}), {"OMPI_COMM_WORLD_RANK='4'"});
  check_error(with(kOmpi, {{"OMPI_COMM_WORLD_LOCAL_RANK", "2"}}),
              {"OMPI_COMM_WORLD_LOCAL_RANK='2'", "OMPI_COMM_WORLD_LOCAL_SIZE=2"});
}

TEST_CASE("discovery: nested launchers, the innermost wins") {
  Vars both = kSlurm;
  for (const auto& [k, v] : kOmpi) both[k] = v;
  CHECK(from(both).source == "ompi");
  CHECK(from(both).rank == 2);
  for (const auto& [k, v] : kTorchrun) both[k] = v;
  CHECK(from(both).source == "env");
  CHECK(from(both).rank == 3);
}

TEST_CASE("discovery: explicit tcp:// and file:// init") {
  InitOptions o;
  o.init_method = "tcp://10.1.2.3:23456";
  o.rank = 1;
  o.world_size = 2;
  auto info = from({}, o);
  CHECK(info.source == "tcp");
  CHECK(info.master_addr == "10.1.2.3");
  CHECK(info.master_port == 23456);
  CHECK(info.rank == 1);
  CHECK(info.world_size == 2);
  o.init_method = "tcp://[::1]:29500";
  info = from({}, o);
  CHECK(info.master_addr == "::1");
  CHECK(info.master_port == 29500);
  o.init_method = "tcp://[fe80::1%eth0]:7";
  CHECK(from({}, o).master_addr == "fe80::1%eth0");
  o.init_method = "file:///shared/job/store";
  info = from({}, o);
  CHECK(info.source == "file");
  CHECK(info.file_path == "/shared/job/store");
  CHECK(info.rank == 1);
  // Rank and world size may come from RANK / WORLD_SIZE instead.
  InitOptions env_ranks;
  env_ranks.init_method = "tcp://localhost:29500";
  info = from({{"RANK", "2"}, {"WORLD_SIZE", "3"}}, env_ranks);
  CHECK(info.rank == 2);
  CHECK(info.world_size == 3);
  CHECK(info.master_addr == "localhost");
}

TEST_CASE("discovery: bad init methods and explicit values") {
  InitOptions o;
  o.rank = 0;
  o.world_size = 2;
  const auto bad = [&](const std::string& method, const std::vector<std::string>& fragments) {
    CAPTURE(method);
    InitOptions copy = o;
    copy.init_method = method;
    check_error({}, fragments, copy);
  };
  bad("udp://x:1", {"init_method='udp://x:1'", "not supported"});
  bad("tcp://host", {"init_method='tcp://host'", "no port"});
  bad("tcp://host:0", {"port='0'", "[1, 65535]"});
  bad("tcp://host:99999", {"port='99999'"});
  bad("tcp://host:http", {"port='http'", "not an integer"});
  bad("tcp://::1:29500", {"brackets"});
  bad("tcp://[::1", {"tcp://[::1", "malformed"});
  bad("tcp://:29500", {"host=''"});
  bad("file://relative/path", {"init_method='file://relative/path'", "absolute"});
  InitOptions no_rank;
  no_rank.init_method = "tcp://h:1";
  check_error({}, {"RANK", "missing", "tcp://h:1"}, no_rank);
  check_error({{"RANK", "0"}}, {"WORLD_SIZE", "missing"}, no_rank);
  InitOptions negative = o;
  negative.init_method = "file:///x";
  negative.rank = -1;
  check_error({}, {"InitOptions::rank='-1'"}, negative);
  negative.rank = 0;
  negative.world_size = 0;
  check_error({}, {"InitOptions::world_size='0'"}, negative);
}

TEST_CASE("discovery: loopback store hosts, with and without IPv6 brackets") {
  using transport::tcp::is_loopback_host;
  for (const char* host : {"localhost", "::1", "[::1]", "127.0.0.1", "127.1.2.3"}) {
    CAPTURE(host);
    CHECK(is_loopback_host(host));
  }
  for (const char* host : {"", "node1", "10.0.0.1", "::", "0.0.0.0", "[::2]", "128.0.0.1"}) {
    CAPTURE(host);
    CHECK_FALSE(is_loopback_host(host));
  }
}

TEST_CASE("discovery: process_env reads the real environment") {
  const char* path = std::getenv("PATH");
  REQUIRE(path != nullptr);
  const auto env = process_env();
  CHECK(env("PATH") == std::optional<std::string>(path));
  CHECK_FALSE(env("RINGLET_TEST_SURELY_UNSET_VARIABLE_42").has_value());
}
