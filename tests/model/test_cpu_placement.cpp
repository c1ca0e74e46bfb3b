// Where the fit's two CPUs sat: a round trip that moved 2x or more between probes is a move; the
// range as the fit's report and profile show it; a probe where there are two CPUs.
#include <doctest/doctest.h>

#include "model/cpu_placement.h"
#include "model/rank_threads.h"

using ringlet::model::CpuPlacement;

TEST_CASE("cpu placement: one placement's probes stay put, near and apart in one fit moved") {
  CpuPlacement none;
  CHECK_FALSE(none.moved());
  CHECK(none.range().empty());
  CpuPlacement apart{{381.2, 412.8, 395.0}};
  CHECK_FALSE(apart.moved());
  CHECK(apart.range() == "381-413 ns");
  CpuPlacement near_then_apart{{110.0, 121.0, 390.0}};
  CHECK(near_then_apart.moved());
  CHECK(near_then_apart.range() == "110-390 ns");
  // One core (about 50 ns) and a shared cache (100-130): two placements as well.
  CHECK(CpuPlacement{{52.0, 104.0}}.moved());
  CHECK_FALSE(CpuPlacement{{52.0, 103.9}}.moved());
}

TEST_CASE("cpu placement: a probe adds a round trip where this process has two CPUs" *
          doctest::skip(ringlet::model::two_cpus().first < 0) *
          doctest::description("needs two CPUs")) {
  CpuPlacement p;
  p.probe();
  p.probe();
  REQUIRE(p.round_trips_ns.size() == 2);
  CHECK(p.round_trips_ns[0] > 1);
  CHECK(p.round_trips_ns[1] > 1);
}
