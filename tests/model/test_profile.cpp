// Profiles: a round trip through JSON, a hand-written file's missing fields kept from the
// defaults, and bad files named with the field at fault.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "model/profile.h"

namespace fs = std::filesystem;
using namespace ringlet;

namespace {

std::string write_file(const std::string& name, const std::string& text) {
  const fs::path path = fs::temp_directory_path() / ("ringlet_profile_" + name + ".json");
  std::ofstream(path) << text;
  return path.string();
}

std::string error_of(const std::string& text) {
  try {
    model::read_profile(write_file("bad", text));
  } catch (const core::ValueError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a profile written and read back is the same") {
  model::Profile p = model::default_profile();
  p.name = "two hosts";
  p.intra = {0.5, 40, false};
  p.inter = {3, 12.5, true, 6.25, 11};
  p.inter.by_size = {{8, 3, 4.5}, {65536, 20, 24}, {1 << 20, 120, 150}};
  p.inter.in_place_bytes = 4096;
  p.inter.one_cpu_four_us = 14;
  p.inter.two_cpus_four_us = 10;
  p.cores_per_host = 3;
  p.wakeup_us = 9.5;
  p.nic_GBps = 25;
  p.nics_per_host = 8;
  p.reduce_GBps = 7;
  p.reduce_in_place_GBps = 17;
  p.copy_GBps = 11;
  p.peer_read_GBps = 4.5;
  p.slice_bytes = 1 << 20;
  p.cache_bytes = 32 << 20;
  p.memory_GBps = 12.5;
  p.core_cache_bytes = 1 << 20;
  p.cached_copy_GBps = 56;
  p.cached_reduce_GBps = 38;
  p.shared_write_GBps = 9;
  p.shared_read_GBps = 37.5;
  p.shared_write_past_GBps = 29;
  p.op_us = {{"rd", 1.5}, {"window", 0}};
  const std::string path = write_file("roundtrip", "");
  model::write_profile(path, p);
  const model::Profile q = model::read_profile(path);
  CHECK(q.name == "two hosts");
  CHECK(q.intra.latency_us == 0.5);
  CHECK(q.intra.bandwidth_GBps == 40);
  CHECK(q.inter.latency_us == 3);
  CHECK(q.inter.bandwidth_GBps == 12.5);
  CHECK_FALSE(q.intra.copies);
  CHECK(q.inter.copies);
  CHECK(q.inter.cpu_GBps == 6.25);
  CHECK(q.intra.cpu_GBps == 0);
  CHECK(q.inter.one_cpu_us == 11);
  CHECK(q.inter.one_cpu_four_us == 14);
  CHECK(q.intra.one_cpu_four_us == 0);
  CHECK(q.inter.two_cpus_four_us == 10);
  CHECK(q.intra.two_cpus_four_us == 0);
  // Not set (0), where the default profile's is not: written as 0, read back as 0.
  REQUIRE(model::default_profile().intra.one_cpu_us > 0);
  CHECK(q.intra.one_cpu_us == 0);
  CHECK(q.inter.in_place_bytes == 4096);
  CHECK(q.intra.in_place_bytes == 0);
  CHECK(q.intra.waiter_bytes == 0);
  REQUIRE(q.inter.by_size.size() == 3);
  CHECK(q.inter.by_size[1].bytes == 65536);
  CHECK(q.inter.by_size[1].one_way_us == 20);
  CHECK(q.inter.by_size[2].exchange_us == 150);
  CHECK(q.intra.by_size.empty());
  CHECK(q.cores_per_host == 3);
  CHECK(q.wakeup_us == 9.5);
  CHECK(q.nic_GBps == 25);
  CHECK(q.nics_per_host == 8);
  CHECK(q.reduce_GBps == 7);
  CHECK(q.reduce_in_place_GBps == 17);
  CHECK(q.copy_GBps == 11);
  CHECK(q.peer_read_GBps == 4.5);
  CHECK(q.cache_bytes == 32 << 20);
  CHECK(q.memory_GBps == 12.5);
  CHECK(q.core_cache_bytes == 1 << 20);
  CHECK(q.cached_copy_GBps == 56);
  CHECK(q.cached_reduce_GBps == 38);
  CHECK(q.shared_write_GBps == 9);
  CHECK(q.shared_write_past_GBps == 29);
  CHECK(q.shared_read_GBps == 37.5);
  CHECK(q.slice_bytes == (1u << 20));
  CHECK(q.op_us == p.op_us);
  CHECK(q.op_seconds("rd") == doctest::Approx(1.5e-6));
  CHECK(q.op_seconds("ring") == 0);  // not named: none
  p.op_us.clear();                   // none at all: written as {}, not read back as the default's
  model::write_profile(path, p);
  CHECK(model::read_profile(path).op_us.empty());
}

TEST_CASE("a hand-written profile keeps the defaults it does not name") {
  const model::Profile q =
      model::read_profile(write_file("partial", R"({"inter": {"latency_us": 2}})"));
  const model::Profile d = model::default_profile();
  CHECK(q.inter.latency_us == 2);
  CHECK(q.inter.bandwidth_GBps == d.inter.bandwidth_GBps);
  CHECK(q.intra.latency_us == d.intra.latency_us);
  CHECK(q.reduce_GBps == d.reduce_GBps);
}

TEST_CASE("a bad profile is an error naming the file and the field") {
  CHECK(error_of(R"({"intra": {"latency_us": -1}})").find("intra.latency_us must be positive") !=
        std::string::npos);
  CHECK(error_of(R"({"reduce_GBps": "fast"})").find("reduce_GBps must be a number") !=
        std::string::npos);
  CHECK(error_of(R"({"nics_per_host": 2.5})").find("nics_per_host must be a whole number") !=
        std::string::npos);
  CHECK(error_of(R"({"intra": {"copies": "yes"}})").find("intra.copies must be true or false") !=
        std::string::npos);
  CHECK(error_of(R"({"cores_per_host": -1})").find("cores_per_host must be a whole number") !=
        std::string::npos);
  CHECK(error_of(R"({"wakeup_us": -2})").find("wakeup_us must be a number of microseconds >= 0") !=
        std::string::npos);
  CHECK(error_of(R"({"shared_read_GBps": 0})").find("shared_read_GBps must be positive") !=
        std::string::npos);
  CHECK(error_of(R"({"inter": {"cpu_GBps": -1}})").find("inter.cpu_GBps must be a number >= 0") !=
        std::string::npos);
  CHECK(error_of(R"({"intra": {"one_cpu_us": "x"}})")
            .find("intra.one_cpu_us must be a number >= 0") != std::string::npos);
  CHECK(error_of(R"({"intra": {"one_cpu_four_us": -3}})")
            .find("intra.one_cpu_four_us must be a number >= 0") != std::string::npos);
  CHECK(error_of(R"({"inter": {"by_size": [{"bytes": 8, "one_way_us": 3, "exchange_us": 4}]}})")
            .find("inter.by_size must be a list of at least two") != std::string::npos);
  CHECK(error_of(R"({"inter": {"by_size": [{"bytes": 8, "one_way_us": 3, "exchange_us": 4},
                                           {"bytes": 8, "one_way_us": 5, "exchange_us": 6}]}})")
            .find("inter.by_size[1].bytes (8) must be larger than the size before it (8)") !=
        std::string::npos);
  CHECK(error_of(R"({"intra": {"by_size": [{"bytes": 8, "one_way_us": 3, "exchange_us": 4},
                                           {"bytes": 64, "one_way_us": 0, "exchange_us": 6}]}})")
            .find("intra.by_size[1].one_way_us must be positive") != std::string::npos);
  CHECK(error_of(R"({"intra": {"by_size": [{"bytes": 8.5, "one_way_us": 3, "exchange_us": 4},
                                           {"bytes": 64, "one_way_us": 5, "exchange_us": 6}]}})")
            .find("intra.by_size[0].bytes must be a whole number") != std::string::npos);
  CHECK(error_of(R"({"intra": {"in_place_bytes": -1}})")
            .find("intra.in_place_bytes must be a whole number of bytes >= 0, not -1") !=
        std::string::npos);
  CHECK(error_of(R"({"intra": {"by_size": [{"bytes": 8, "one_way_us": 3}, 1]}})")
            .find("intra.by_size[0] must be {") != std::string::npos);
  CHECK(
      error_of(R"({"op_us": {"ringg": 1}})").find("op_us.ringg is not an algorithm (ring, rd, ") !=
      std::string::npos);
  CHECK(error_of(R"({"op_us": {"rd": -1}})")
            .find("op_us.rd must be a number of microseconds >= 0, not -1") != std::string::npos);
  CHECK(error_of(R"({"op_us": [1]})").find("op_us must be an object") != std::string::npos);
  CHECK(error_of(R"({"nic": 3})").find("unknown field nic") != std::string::npos);
  CHECK(error_of(R"({"inter": {"lat": 3}})").find("unknown field inter.lat") != std::string::npos);
  CHECK(error_of("{not json").find("not JSON") != std::string::npos);
  CHECK(error_of("[1, 2]").find("must be a JSON object") != std::string::npos);
  CHECK(error_of("{}").empty());
  const std::string missing = "/nonexistent/ringlet/profile.json";
  CHECK_THROWS_WITH_AS(model::read_profile(missing), doctest::Contains(missing.c_str()),
                       core::ValueError);
}
