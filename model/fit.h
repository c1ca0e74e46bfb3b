// fit_machine(): measures this machine into a profile (`ringlet model fit`): each transport's
// one-way time of a message by size, from ping-pongs between two ranks (threads of this process,
// each with its own mesh, as the collectives use them, and each on a CPU of its own), the host's
// reduction and copy rates, and its memory's bandwidth past its last-level cache.
// The profile's intra-host link is shm, its inter-host link and NIC tcp over loopback; the
// wake-up, a shm ping-pong with both ranks on one CPU (and each link's one-CPU times: two ranks on
// one CPU, four on one, four on two); the communicator's work per op, two ranks' 8-byte
// all-reduces against their simulation (op_costs.h). Where the two CPUs' round trip moves during a
// fit (a VM's host moved them), the fit is made again, up to FitOptions::attempts in all
// (cpu_placement.h).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "model/cpu_placement.h"
#include "model/profile.h"
#include "model/sliced_copies.h"

namespace ringlet::model {

// One size's one-way time: the mean of half the round trips (the fastest of three sittings).
struct Sample {
  std::size_t bytes = 0;
  double one_way_us = 0;
  double exchange_us = 0;  // both ranks sending and receiving it at once
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
  double reduce_GBps = 0;            // float32 sum, one thread, past its own cache (see below)
  double reduce_in_place_GBps = 0;   // the same into its own buffer of a slice it holds
  double copy_GBps = 0;              // core::copy, the same
  double peer_read_GBps = 0;         // 16 MiB read from a peer's memory over shm (0: cannot)
  double memory_GBps = 0;            // memcpy past the cache, every core at once, all together
  std::size_t last_level_bytes = 0;  // the last-level cache, as the machine names it (0: unknown)
  std::size_t cache_bytes = 0;       // the part of it two ranks' copies find (profile's)
  std::size_t core_cache_bytes = 0;  // a core's own (level 2; 0: unknown)
  std::string caches_from;           // who named them: "sysfs", "cpuid" (caches.h) or empty
  double cached_reduce_GBps = 0;     // the rates on buffers that fit it
  double cached_copy_GBps = 0;
  double shared_write_GBps = 0;       // 64 KiB another core read before, written (0: one CPU)
  double shared_read_GBps = 0;        // 64 KiB another core just wrote, read
  double shared_write_past_GBps = 0;  // 4 x a core's cache another core read, written
  SlicedCopies sliced;                // every core copying slice by slice, by buffer size
  // The rate at which the CPUs at the ends of a tcp loopback message copy it (the profile's
  // inter.cpu_GBps; between hosts the wire may be slower): from what an exchange takes beyond
  // one way (cpu_share_GBps in fit.cpp).
  double tcp_cpu_GBps = 0;
  double one_cpu = 0;            // 8 bytes' one-way time over shm with both ranks on one CPU, us
  double wakeup_us = 0;          // that less the shm latency: the scheduler's wake-up
  double tcp_one_cpu = 0;        // the same over tcp loopback (0: not measured, with between_ranks)
  double one_cpu_four = 0;       // a hop of 8 bytes around four ranks on one CPU over shm, us
  double tcp_one_cpu_four = 0;   // the same over tcp loopback (0: not measured)
  double two_cpus_four = 0;      // a hop of 8 bytes around four ranks on two CPUs over shm, us
  double tcp_two_cpus_four = 0;  // the same over tcp loopback (0: not measured)
  CpuPlacement cpus;             // where its two CPUs sat: probed before it and after each part
  Profile profile;
  int rank = 0;  // with between_ranks, the job's; only rank 0's fit is whole
};

struct FitOptions {
  bool quick = false;  // fewer repetitions (tests); otherwise a few seconds
  // Run as a launched job of two ranks, one per host: the link between hosts is the job's tcp
  // connection between them instead of tcp loopback; rank 0 measures the rest.
  bool between_ranks = false;
  // Fits made in all, where the CPUs' round trip moved during one (CpuPlacement::moved): the
  // last is kept, and its report says so. One with between_ranks.
  int attempts = 3;
};

MachineFit fit_machine(const FitOptions& options = {});

// The cache two ranks' copies find, where sysfs names a larger one (on a VM, the whole chip's,
// shared with other guests): the memory two ranks touch (three buffers each, as the model counts
// it) in the largest shm exchange from 1 MiB up that takes at most half again as long as one
// way, as exchanges do while the two cores' copies stay in cache; past it the two directions
// take turns. 512 KiB's where the 1 MiB exchange is already slower; `last_level` (0: unknown)
// where every exchange measured is as fast as one way; never more than it.
std::size_t copies_cache_bytes(const std::vector<Sample>& shm, std::size_t last_level);

// The outputs of the fit's reduction and copy past a core's own cache (Profile::reduce_GBps,
// copy_GBps), as the bytes a rank touches past its share of that cache mostly lie: twice a
// core's cache (`core_cache`; 1 MiB where unknown), at most a third of the cache two ranks'
// copies find (`cache`, 0: unknown), so that a reduction's three buffers stay within it.
std::size_t past_core_cache_bytes(std::size_t core_cache, std::size_t cache);

// The buffer the fit's reduction in place sweeps (Profile::reduce_in_place_GBps): four times a
// core's cache (`core_cache`; 4 MiB where unknown), which a sweep keeps none of.
std::size_t in_place_reduce_bytes(std::size_t core_cache);

// The last level a fitted profile gives (Profile::last_level_bytes): where every core copying
// slice by slice finds one, that; where their rate never falls by a quarter (no knee among the
// sizes measured), the level the machine names (`named`: sysfs's, else the CPU's report; 0:
// unknown), with no rate past it (past_last_level_GBps stays 0), so that it only says where the
// cache that tcp loopback's kernel copies and a waiter's own copies find ends.
std::size_t profile_last_level_bytes(const SlicedCopies& sliced, std::size_t named);

// Each transport's samples, then the rates, as a table for people.
std::string fit_report(const MachineFit& fit);

}  // namespace ringlet::model
