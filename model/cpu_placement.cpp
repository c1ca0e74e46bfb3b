#include "model/cpu_placement.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/cpu_round_trip.h"
#include "model/rank_threads.h"

namespace ringlet::model {

void CpuPlacement::probe() {
  const auto [a, b] = two_cpus();
  if (a < 0) return;
  double fastest = std::nan("");
  for (int i = 0; i < 3; ++i) {
    const double ns = core::cpu_round_trip_ns(a, b);
    if (std::isfinite(ns) && !(ns >= fastest)) fastest = ns;
  }
  if (std::isfinite(fastest)) round_trips_ns.push_back(fastest);
}

bool CpuPlacement::moved() const {
  if (round_trips_ns.empty()) return false;
  const auto [least, most] = std::minmax_element(round_trips_ns.begin(), round_trips_ns.end());
  return *most >= kMovedRatio * *least;
}

std::string CpuPlacement::range() const {
  if (round_trips_ns.empty()) return "";
  const auto [least, most] = std::minmax_element(round_trips_ns.begin(), round_trips_ns.end());
  char text[64];
  std::snprintf(text, sizeof text, "%.0f-%.0f ns", *least, *most);
  return text;
}

}  // namespace ringlet::model
