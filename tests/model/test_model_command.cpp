// `ringlet model predict` end to end: its table is the simulator's answer, a profile file changes
// it, the sweep names where the fastest changes and where the tree stops beating the ring, and
// bad options or a bad profile are errors that say what and where.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "model/caches.h"
#include "model/fit.h"
#include "model/simulate.h"
#include "ringlet_command.h"

using namespace ringlet;
using ringlet::testing::contains;

namespace {

testing::CommandResult ringlet_model(const std::string& args) {
  return testing::finish_command(
      testing::start_command(testing::require_ringlet_binary() + " model " + args));
}

// The time_us column of `algorithm`'s row (printed to 0.01 us).
double time_us(const std::string& output, const std::string& algorithm) {
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream row(line);
    std::string name;
    double t = 0;
    if (row >> name >> t && name == algorithm) return t;
  }
  FAIL("no row for ", algorithm, " in:\n", output);
  return 0;
}

double simulated_us(collectives::Algorithm algorithm, int ranks, int per_host, std::size_t bytes,
                    const model::Profile& profile, bool in_place = true) {
  model::SimCase c{model::Collective::all_reduce, algorithm, {ranks, per_host}, bytes, in_place};
  return model::simulate(c, profile).seconds * 1e6;
}

}  // namespace

TEST_CASE("model predict prints each algorithm's simulated time, the fastest and the crossovers") {
  const auto r = ringlet_model("predict --ranks 64 --per-host 8 --size 4M");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(contains(r.output, "# all_reduce of 4 MiB (float32) over 64 ranks, 8 per host (8 hosts)"));
  const model::Profile p = model::default_profile();
  for (const auto a : model::simulated_algorithms(model::Collective::all_reduce)) {
    CAPTURE(collectives::algorithm_name(a));
    CHECK(std::abs(time_us(r.output, collectives::algorithm_name(a)) -
                   simulated_us(a, 64, 8, 4 << 20, p)) <= 0.005001);
  }
  CHECK(contains(r.output, "# fastest at 4 MiB: "));
  CHECK(contains(r.output, "# fastest by size (every power of two, 8 B .. 4 MiB):"));
  CHECK(contains(r.output, "#   8 B"));
  CHECK(contains(r.output, "# tree against ring: the tree is faster below "));
}

TEST_CASE("model predict with a profile file uses its figures") {
  const auto path = std::filesystem::temp_directory_path() / "ringlet_model_command_profile.json";
  std::ofstream(path) << R"({"name": "slow hosts", "inter": {"latency_us": 500}})";
  const auto r = ringlet_model("predict --ranks 16 --per-host 4 --size 64K --no-sweep --profile " +
                               path.string());
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(contains(r.output, "# profile: slow hosts"));
  CHECK_FALSE(contains(r.output, "fastest by size"));
  const model::Profile p = model::read_profile(path.string());
  CHECK(std::abs(time_us(r.output, "ring") -
                 simulated_us(collectives::Algorithm::ring, 16, 4, 64 << 10, p)) <= 0.005001);
  CHECK(time_us(r.output, "ring") > 500 * 2 * 3);  // crosses hosts 3 times in each pass at least
}

// A host's cores: the profile's (the default's: a core per rank), or --cores-per-host.
TEST_CASE(
    "model predict --cores-per-host gives each host that many cores, 0 (the default "
    "profile's) a core per rank") {
  const std::string args = "predict --ranks 16 --per-host 8 --size 1M --no-sweep";
  const auto shared = ringlet_model(args + " --cores-per-host 2");
  INFO(shared.output);
  REQUIRE(shared.status == 0);
  CHECK(contains(shared.output, "# each host's 8 ranks take turns on its 2 cores"));
  const auto one_host = ringlet_model("predict --ranks 8 --size 64K --no-sweep --cores-per-host 2");
  CHECK(contains(one_host.output, "# the host's 8 ranks take turns on its 2 cores"));
  const auto by_default = ringlet_model(args);
  INFO(by_default.output);
  REQUIRE(by_default.status == 0);
  CHECK_FALSE(contains(by_default.output, "take turns"));
  CHECK(contains(by_default.output, "a core per rank"));
  model::Profile p = model::default_profile();
  const auto ring = collectives::Algorithm::ring;
  for (const int cores : {8, 0}) {
    CAPTURE(cores);
    const auto own = ringlet_model(args + " --cores-per-host " + std::to_string(cores));
    INFO(own.output);
    REQUIRE(own.status == 0);
    CHECK_FALSE(contains(own.output, "take turns"));
    CHECK(contains(own.output, cores > 0 ? "8 cores per host" : "a core per rank"));
    p.cores_per_host = cores;
    CHECK(std::abs(time_us(own.output, "ring") - simulated_us(ring, 16, 8, 1 << 20, p)) <=
          0.005001);
    CHECK(time_us(own.output, "ring") < time_us(shared.output, "ring"));
    CHECK(time_us(own.output, "ring") == time_us(by_default.output, "ring"));
  }
}

// An out-of-place all-reduce past the cache: its reductions out of the input cost it more.
TEST_CASE("model predict --out-of-place simulates the result written into another buffer") {
  const auto path = std::filesystem::temp_directory_path() / "ringlet_model_out_of_place.json";
  std::ofstream(path) << R"({"name": "small cache", "cache_bytes": 1048576, "memory_GBps": 4,
                             "cores_per_host": 2})";
  const std::string args = "predict --ranks 4 --size 16M --no-sweep --profile " + path.string();
  const auto apart = ringlet_model(args + " --out-of-place");
  INFO(apart.output);
  REQUIRE(apart.status == 0);
  CHECK(contains(apart.output, "# all_reduce of 16 MiB (float32, out of place) over 4 ranks"));
  const model::Profile p = model::read_profile(path.string());
  const auto ring = collectives::Algorithm::ring;
  CHECK(std::abs(time_us(apart.output, "ring") - simulated_us(ring, 4, 0, 16 << 20, p, false)) <=
        0.005001);
  const auto in_place = ringlet_model(args);
  REQUIRE(in_place.status == 0);
  CHECK(time_us(apart.output, "ring") > time_us(in_place.output, "ring"));
}

TEST_CASE("model predict: bad options and a bad profile say what is wrong") {
  struct Case {
    std::string args;
    int status;
    std::string message;
  };
  const Case cases[] = {
      {"predict --size 4M", 2, "--ranks is required"},
      {"predict --ranks 8", 2, "--size is required"},
      {"predict --ranks 8 --size 12X", 2, "--size: '12X' is not a size"},
      {"predict --ranks 8 --size 32G", 2, "--size: 32G is out of range"},
      {"predict --ranks 0 --size 8", 2, "--ranks: '0' is not a whole number from 1 to 65536"},
      {"predict --ranks 8 --per-host 9 --size 8", 2, "--per-host 9 is more than --ranks 8"},
      {"predict --ranks 8 --size 8 --collective broadcast", 2, "'broadcast' is not a collective"},
      {"predict --ranks 8 --size 8 --cores-per-host -1", 2,
       "--cores-per-host: '-1' is not a whole number from 0 to 4096"},
      {"predict --ranks 8 --size 8 --rank 3", 2, "--rank"},
      {"predict --ranks 8 --size 8 --collective all_gather --out-of-place", 2,
       "--out-of-place is for all_reduce"},
      {"predict --ranks 8 --size 8 --profile /nonexistent/p.json", 1,
       "profile /nonexistent/p.json: cannot open it"},
      {"frobnicate", 2, "frobnicate"},
      {"", 2, "missing a subcommand"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.args);
    const auto r = ringlet_model(c.args);
    CHECK(r.status == c.status);
    CHECK_MESSAGE(contains(r.output, c.message), r.output);
  }
}

TEST_CASE("model predict runs all_gather and reduce_scatter algorithms too") {
  const auto ag = ringlet_model("predict --ranks 8 --size 1M --collective all_gather --no-sweep");
  INFO(ag.output);
  REQUIRE(ag.status == 0);
  CHECK(time_us(ag.output, "bruck") > 0);
  CHECK(time_us(ag.output, "doubling") > 0);
  const auto rs = ringlet_model("predict --ranks 8 --size 1M --collective reduce_scatter");
  INFO(rs.output);
  REQUIRE(rs.status == 0);
  CHECK(time_us(rs.output, "halving") > 0);
  CHECK_FALSE(contains(rs.output, "tree against ring"));
}

TEST_CASE("model fit measures shm, tcp, reduction and copy into a profile predict reads") {
  const auto path = std::filesystem::temp_directory_path() / "ringlet_model_fit.json";
  std::filesystem::remove(path);
  const auto r = ringlet_model("fit --quick --out " + path.string());
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(contains(r.output,
                 "#      bytes    shm one-way   shm exchange    tcp one-way   tcp exchange"));
  CHECK(contains(r.output, "   16777216 "));
  CHECK(contains(r.output, "# both ranks on one CPU: 8 bytes over shm take "));
  CHECK(contains(r.output, "# profile written to " + path.string()));
  const model::Profile p = model::read_profile(path.string());
  CHECK(p.source.rfind("ringlet model fit, ", 0) == 0);
  CHECK(p.intra.latency_us > 0);
  CHECK(p.intra.bandwidth_GBps > 0);
  CHECK(p.inter.bandwidth_GBps == p.nic_GBps);
  CHECK(p.reduce_GBps > 0);
  CHECK(p.reduce_in_place_GBps > 0);
  CHECK(contains(r.output, "# in place, of a 64 KiB slice it holds, over "));
  CHECK(p.copy_GBps > 0);
  CHECK(p.cores_per_host >= 1);
  CHECK(p.wakeup_us >= 0);
  // tcp loopback's CPUs: what an exchange takes beyond one way, at most a core's memcpy.
  CHECK(p.inter.cpu_GBps > 0);
  CHECK(p.inter.cpu_GBps <= p.copy_GBps);
  CHECK(contains(r.output,
                 "# tcp loopback, the CPUs' share of a message (what an exchange takes "
                 "beyond one way): "));
  // tcp loopback's times by size, every size measured, and shm's (for its copies of a whole
  // message).
  REQUIRE(p.inter.by_size.size() == 9);
  CHECK(p.inter.by_size.front().bytes == 8);
  CHECK(p.inter.by_size[3].bytes == 128 * 1024);
  CHECK(p.inter.by_size[5].bytes == 512 * 1024);
  CHECK(p.inter.by_size.back().bytes == 16 << 20);
  CHECK(p.inter.by_size.front().one_way_us == p.inter.latency_us);
  REQUIRE(p.intra.by_size.size() == 9);
  CHECK(p.intra.by_size[2].bytes == 64 * 1024);
  CHECK(p.intra.by_size[2].exchange_us > 0);
  CHECK(p.intra.one_cpu_us > 0);        // both ranks on one CPU, shm
  CHECK(p.inter.one_cpu_us > 0);        // and tcp loopback
  CHECK(p.intra.one_cpu_four_us > 0);   // four ranks on one CPU, shm
  CHECK(p.inter.one_cpu_four_us > 0);   // and tcp loopback
  CHECK(p.intra.two_cpus_four_us > 0);  // four ranks on two CPUs, shm
  CHECK(p.inter.two_cpus_four_us > 0);  // and tcp loopback
  CHECK(contains(r.output, "# four ranks on one CPU: 8 bytes around their ring take "));
  CHECK(contains(r.output, "# four ranks on two CPUs, two each: a hop to the other CPU takes "));
  CHECK(contains(r.output, "# both ranks on one CPU: 8 bytes over tcp loopback take "));
  CHECK(contains(r.output, "# memory, every core copying at once: "));
  CHECK(contains(r.output, "# every core copying slice by slice: "));
  // A rate past the last level where the copies found one; else the machine's level, if named.
  CHECK((p.past_last_level_GBps > 0) == !contains(r.output, "no last level seen"));
  CHECK((p.past_last_level_GBps <= 0 || p.last_level_bytes > 0));
  CHECK(contains(
      r.output,
      "# the cache the copies find (two ranks' largest shm exchange at most 1.5x one way): "));
  // The communicator's work per op: every all-reduce algorithm simulated for two ranks of one
  // host (shm copies: the windows and cross-memory attach too), none below 0.
  CHECK(contains(r.output, "# the communicator's own work per op (an 8-byte all-reduce of 2 "));
  for (const char* algorithm : {"ring", "rd", "rabenseifner", "tree", "direct", "window"}) {
    INFO(algorithm);
    REQUIRE(p.op_us.count(algorithm) == 1);
    CHECK(p.op_us.at(algorithm) >= 0);
  }
  CHECK(p.op_us.size() == 6);
  // Where the machine names the cache (sysfs, else cpuid), the memory's bandwidth past it is
  // measured into the profile; where it names a core's own, the rates within it; with two CPUs,
  // another core's lines.
  if (sysconf(_SC_LEVEL2_CACHE_SIZE) > 0) CHECK(p.core_cache_bytes > 0);
  CHECK(contains(r.output, "MiB (sysfs)") + contains(r.output, "MiB (cpuid)") +
            contains(r.output, "MiB (unknown)") ==
        1);
  CHECK((p.cache_bytes > 0) == (p.memory_GBps > 0));
  CHECK((p.core_cache_bytes > 0) == (p.cached_copy_GBps > 0));
  CHECK((p.core_cache_bytes > 0) == (p.cached_reduce_GBps > 0));
  CHECK(contains(r.output, "# 64 KiB another core's cache holds: written at "));
  if (std::thread::hardware_concurrency() >= 2) {
    CHECK(p.shared_write_GBps > 0);
    CHECK(p.shared_read_GBps > 0);
    CHECK(p.shared_write_past_GBps > 0);
    CHECK(contains(r.output, " another core read (past its cache): written at "));
    // Where its two CPUs sat: probed before and after its parts, in the report and the source.
    CHECK(contains(r.output,
                   "# the round trip of a cache line between its two CPUs over the "
                   "fit: "));
    CHECK(contains(p.source, "; the CPUs' round trip "));
  }
  const auto predicted =
      ringlet_model("predict --ranks 4 --size 1M --no-sweep --profile " + path.string());
  CHECK(predicted.status == 0);
  CHECK(contains(predicted.output, "# profile: this machine: shm within a host, tcp loopback"));
  CHECK(contains(ringlet_model("fit --bogus").output, "--bogus"));
}

TEST_CASE("a CPU's caches: the deepest level, the largest of its own, and who named them") {
  // sysfs on a 2-vCPU VM: its own L1 and L2, a share of an L3 the whole chip's size.
  const auto vm = model::caches_of({{1, 48 << 10, true},
                                    {1, 32 << 10, true},
                                    {2, 1 << 20, true},
                                    {3, std::size_t{480} << 20, false}},
                                   "sysfs");
  CHECK(vm.last_level == std::size_t{480} << 20);
  CHECK(vm.own == std::size_t{1} << 20);
  CHECK(vm.source == "sysfs");
  // Two L3 slices named: the larger. No L3: L2 is the last level and its own.
  CHECK(model::caches_of({{3, 16 << 20, false}, {3, 32 << 20, false}}, "cpuid").last_level ==
        std::size_t{32} << 20);
  const auto two = model::caches_of({{1, 48 << 10, true}, {2, 2 << 20, true}}, "cpuid");
  CHECK(two.last_level == std::size_t{2} << 20);
  CHECK(two.own == std::size_t{2} << 20);
  // Nothing named (or only empty sizes): unknown, from no one.
  const auto none = model::caches_of({{2, 0, true}}, "cpuid");
  CHECK(none.last_level == 0);
  CHECK(none.own == 0);
  CHECK(none.source.empty());
  // This machine: where its CPU reports a level 2, the fit knows a core's own cache.
  const model::Caches here = model::read_caches();
  if (sysconf(_SC_LEVEL2_CACHE_SIZE) > 0) {
    CHECK(here.own > 0);
    CHECK((here.source == "sysfs" || here.source == "cpuid"));
  }
}

TEST_CASE("the fit's cache is where two ranks' shm exchanges stop overlapping") {
  // bytes, one way, exchange (us): overlapped up to 1 MiB (1.4x is noise), then about twice.
  const std::vector<model::Sample> knee{
      {64 << 10, 7, 7}, {1 << 20, 150, 210}, {4 << 20, 450, 800}, {16 << 20, 1400, 2600}};
  CHECK(model::copies_cache_bytes(knee, std::size_t{480} << 20) == std::size_t{6} << 20);
  CHECK(model::copies_cache_bytes(knee, std::size_t{4} << 20) == std::size_t{4} << 20);
  CHECK(model::copies_cache_bytes(knee, 0) == std::size_t{6} << 20);
  // Slower already at 1 MiB: 512 KiB's working set. Overlapped throughout: sysfs's figure.
  const std::vector<model::Sample> early{{1 << 20, 150, 300}, {4 << 20, 450, 900}};
  CHECK(model::copies_cache_bytes(early, std::size_t{480} << 20) == std::size_t{3} << 20);
  const std::vector<model::Sample> flat{{1 << 20, 150, 150}, {16 << 20, 1400, 1500}};
  CHECK(model::copies_cache_bytes(flat, std::size_t{32} << 20) == std::size_t{32} << 20);
  CHECK(model::copies_cache_bytes(flat, 0) == 0);
}

TEST_CASE("the fit's rates past a core's cache: outputs past it, whose reduction fits the cache") {
  constexpr std::size_t KiB = 1024, MiB = KiB << 10;
  CHECK(model::past_core_cache_bytes(512 * KiB, 6 * MiB) == MiB);    // twice a 512 KiB cache
  CHECK(model::past_core_cache_bytes(2 * MiB, 6 * MiB) == 2 * MiB);  // a third of the cache
  CHECK(model::past_core_cache_bytes(2 * MiB, 32 * MiB) == 4 * MiB);
  CHECK(model::past_core_cache_bytes(0, 0) == MiB);  // neither known
  CHECK(model::past_core_cache_bytes(512 * KiB, 0) == MiB);
  CHECK(model::past_core_cache_bytes(0, 6 * KiB) == 4 * KiB);  // never below a page
}

TEST_CASE("the last level slice-by-slice copies find: where their rate falls halfway") {
  const auto MiB = [](std::size_t n) { return n << 20; };
  // Two cores: 28 GB/s up to 16 MiB each, 18 at 32, 13 from 64 (as on a 2-vCPU VM). Halfway,
  // 20.5 GB/s, falls three quarters of the way from 16 to 32 MiB: 16 x 2^0.75 MiB each, both
  // sides of two cores' buffers.
  const std::vector<model::SlicedRate> vm{{MiB(2), 28},  {MiB(16), 28}, {MiB(32), 18},
                                          {MiB(64), 13}, {MiB(4), 28},  {MiB(256), 13}};
  const model::SlicedCopies knee = model::sliced_knee(vm, 2);
  CHECK(knee.rates.front().per_core_bytes == MiB(2));  // sorted by size
  CHECK(static_cast<double>(knee.last_level_bytes) ==
        doctest::Approx(4 * 16 * std::pow(2.0, 0.75) * MiB(1)).epsilon(1e-6));
  CHECK(knee.past_GBps == 13);
  // No fall by a quarter, or one size alone: no level.
  const std::vector<model::SlicedRate> flat{{MiB(2), 28}, {MiB(256), 22}};
  CHECK(model::sliced_knee(flat, 2).last_level_bytes == 0);
  CHECK(model::sliced_knee(flat, 2).past_GBps == 0);
  CHECK(model::sliced_knee({{MiB(2), 28}}, 2).last_level_bytes == 0);
  // Measured: as many rates as powers of two from the least to the most.
  const model::SlicedCopies measured = model::measure_sliced_copies(2, MiB(1), MiB(4), 1);
  REQUIRE(measured.rates.size() == 3);
  for (const auto& r : measured.rates) CHECK(r.GBps > 0);
}

TEST_CASE("the profile's last level: the slice-by-slice copies' knee, else the machine's own") {
  const auto MiB = [](std::size_t n) { return n << 20; };
  const model::SlicedCopies knee =
      model::sliced_knee({{MiB(2), 28}, {MiB(16), 28}, {MiB(64), 13}, {MiB(256), 13}}, 2);
  REQUIRE(knee.last_level_bytes > 0);
  CHECK(model::profile_last_level_bytes(knee, MiB(32)) == knee.last_level_bytes);
  // No knee (the copies past the named 32 MiB no slower than within): the named level.
  const model::SlicedCopies flat = model::sliced_knee({{MiB(1), 4.6}, {MiB(256), 12.2}}, 2);
  REQUIRE(flat.last_level_bytes == 0);
  CHECK(model::profile_last_level_bytes(flat, MiB(32)) == MiB(32));
  CHECK(model::profile_last_level_bytes(flat, 0) == 0);
  CHECK(model::profile_last_level_bytes({}, MiB(32)) == MiB(32));
}

TEST_CASE("model fit measures on a process allowed one CPU (its two ranks then share it)") {
  const auto path = std::filesystem::temp_directory_path() / "ringlet_model_fit_one_cpu.json";
  std::filesystem::remove(path);
  const auto r = testing::finish_command(
      testing::start_command("taskset -c 0 " + testing::require_ringlet_binary() +
                             " model fit --quick --out " + path.string()));
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(contains(r.output, "# profile written to " + path.string()));
  const model::Profile p = model::read_profile(path.string());
  CHECK(p.intra.latency_us > 0);
  CHECK(p.intra.bandwidth_GBps > 0);
}

TEST_CASE("model fit --between-ranks measures the link between a launched job's two ranks") {
  const auto path = std::filesystem::temp_directory_path() / "ringlet_model_fit_job.json";
  std::filesystem::remove(path);
  const std::string ringlet = testing::require_ringlet_binary();
  const auto r = testing::finish_command(
      testing::start_command(ringlet + " launch --nproc-per-node 2 --quiet-others -- " + ringlet +
                             " model fit --between-ranks --quick --out " + path.string()));
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(contains(r.output, "tcp: tcp between ranks 0 and 1"));
  CHECK(contains(r.output,
                 "# tcp loopback, the CPUs' share of a message (what an exchange takes "
                 "beyond one way): "));
  const model::Profile p = model::read_profile(path.string());
  CHECK(contains(p.name, "tcp between ranks 0 and 1 between hosts"));
  CHECK(p.inter.bandwidth_GBps > 0);
  CHECK(p.inter.cpu_GBps > 0);
  CHECK(p.inter.by_size.empty());  // a link between hosts: its rates alone
  // Not launched as two ranks: said, not measured.
  const auto alone = ringlet_model("fit --between-ranks --quick");
  CHECK(alone.status != 0);
  CHECK(contains(alone.output, "runs as a job of 2 ranks"));
}

TEST_CASE("model table writes each world size's fastest algorithm by size, as predict finds it") {
  const auto r = ringlet_model("table --ranks 2,8 --up-to 1M");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(contains(r.output, "\"all_reduce\""));
  CHECK(contains(r.output, "\"2\""));
  CHECK(contains(r.output, "\"8\""));
  const auto sweep = ringlet_model("predict --ranks 8 --size 1M");
  // The sweep's first range names the table's first algorithm for 8 ranks.
  const auto first = sweep.output.find("#   8 B");
  REQUIRE(first != std::string::npos);
  const std::string line = sweep.output.substr(first, sweep.output.find('\n', first) - first);
  const std::string algorithm = line.substr(line.rfind(' ') + 1);
  const auto eight = r.output.find("\"8\"");
  CHECK(r.output.find("\"" + algorithm + "\"", eight) != std::string::npos);
  CHECK(ringlet_model("table").status == 2);
  CHECK(contains(ringlet_model("table --ranks 1").output, "--ranks: '1' is not a whole number"));
}

TEST_CASE("model table chooses among auto's own algorithms, or those --algorithms names") {
  const auto plain = ringlet_model("table --ranks 3 --up-to 64M");
  INFO(plain.output);
  REQUIRE(plain.status == 0);
  CHECK_FALSE(contains(plain.output, "\"tree\""));
  CHECK_FALSE(contains(plain.output, "\"rabenseifner\""));
  CHECK(contains(plain.output, "\"rd\""));
  // Named: only those, here the ring and the tree (which the default profile has faster than
  // the ring at 3 ranks).
  const auto named = ringlet_model("table --ranks 3 --up-to 64M --algorithms ring,tree");
  INFO(named.output);
  REQUIRE(named.status == 0);
  CHECK(contains(named.output, "\"tree\""));
  CHECK_FALSE(contains(named.output, "\"rd\""));
  CHECK_FALSE(contains(named.output, "\"window\""));
  const auto bad = ringlet_model("table --ranks 3 --algorithms ring,treex");
  CHECK(bad.status == 2);
  CHECK(contains(bad.output,
                 "--algorithms: 'treex' is not an all-reduce algorithm the model "
                 "simulates (ring, rd, tree, rabenseifner, direct, window)"));
  // Only the windows, across hosts, where the simulator does not run them: none left.
  const auto none = ringlet_model("table --ranks 4 --per-host 2 --algorithms window");
  CHECK(none.status == 2);
  CHECK(contains(none.output, "--algorithms names none the model simulates for 4 ranks"));
}

// --cores-per-host: the same tables as a profile that says so, for hosts with those cores.
TEST_CASE("model table --cores-per-host writes the tables of hosts with that many cores") {
  const std::string args = "table --ranks 64 --per-host 8 --up-to 64M --algorithms ring,tree";
  const auto own = ringlet_model(args + " --cores-per-host 0");
  INFO(own.output);
  REQUIRE(own.status == 0);
  const auto path = std::filesystem::temp_directory_path() / "ringlet_model_core_per_rank.json";
  std::ofstream(path) << R"({"cores_per_host": 0})";
  const auto file = ringlet_model(args + " --profile " + path.string());
  REQUIRE(file.status == 0);
  // The tables (a sanitizer's warnings may come before them).
  const auto tables = [](const std::string& output) { return output.substr(output.find("{\n")); };
  CHECK(tables(own.output) == tables(file.output));
  const auto shared = ringlet_model(args + " --cores-per-host 2");
  REQUIRE(shared.status == 0);
  CHECK(tables(own.output) == tables(ringlet_model(args).output));  // the default: a core each
  // Four ranks to a core move where the ring takes over.
  CHECK(tables(own.output) != tables(shared.output));
  CHECK(ringlet_model("table --ranks 8 --cores-per-host x").status == 2);
}
