// fit_machine(): measures this machine into a profile (`ringlet model fit`): each transport's
// one-way time of a message by size, from ping-pongs between two ranks (threads of this process,
// each with its own mesh, as the collectives use them), and the host's reduction and copy rates.
// The profile's intra-host link is shm, its inter-host link and NIC tcp over loopback.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "model/profile.h"

namespace ringlet::model {

// One size's one-way time: the median of half the round trips (the fastest of three sittings).
struct Sample {
  std::size_t bytes = 0;
  double one_way_us = 0;
};

// A link's figures: latency is the one-way time of the smallest message, bandwidth the
// least-squares slope of the one-way time over the sizes from 256 KiB up.
struct LinkFit {
  std::string transport;
  std::vector<Sample> samples;
  LinkCost cost;
};

struct MachineFit {
  LinkFit shm, tcp;
  double reduce_GBps = 0;  // float32 sum, out of cache, one thread
  double copy_GBps = 0;    // memcpy, out of cache, one thread
  Profile profile;
};

// `quick`: fewer repetitions (tests); otherwise a few seconds.
MachineFit fit_machine(bool quick = false);

// Each transport's samples, then the rates, as a table for people.
std::string fit_report(const MachineFit& fit);

}  // namespace ringlet::model
