// Profile: what the simulated network charges, per link class and per rank. Figures are in the
// units people quote (microseconds, GB/s = 1e9 bytes per second) and are read from a JSON file:
// one `ringlet model fit` measured here, or one written by hand from a machine's published
// figures (model/profiles/). A message of b bytes costs latency + b / bandwidth on its link (or,
// on a link with times by size and within the cache, what those give at b);
// between hosts it also passes through a NIC of the sending host and one of the receiving host,
// which the host's ranks share: nics_per_host each, a rank using NIC (its index on the host mod
// nics_per_host), each NIC carrying one message at a time each way at nic_GBps. A reduction
// costs its output bytes / reduce_GBps on a core, a copy bytes / copy_GBps; a link whose CPUs
// move the bytes (`copies`) holds a core at each end while they move them (cpu_GBps). On a host
// with more ranks than cores, such a link's latency within the host is its cores' work (half at
// each end), and a receive that had to wait ends with a wake-up on a core: wakeup_us, or within
// the host the link's one-CPU time (one_cpu_us, one_cpu_four_us by the ranks on the core) less
// its latency.
// Past the cache, a host's cores share its memory's bandwidth (memory_GBps).
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace ringlet::model {

// A message's measured times on a link at one size (`ringlet model fit`'s means).
struct SizeTimes {
  std::size_t bytes = 0;
  double one_way_us = 0;   // half a ping-pong
  double exchange_us = 0;  // both ends sending and receiving it at once
};

struct LinkCost {
  double latency_us = 0;
  double bandwidth_GBps = 0;
  // The ranks' CPUs move the bytes (shm, tcp: a copy on each side), so a message occupies a core
  // of the sender's and one of the receiver's while it moves; not so over DMA (NVLink, RDMA).
  bool copies = false;
  // With copies: the rate a core at each end moves the bytes at, when the wire is slower than
  // the CPUs (tcp over a real or shaped link); 0: the link's bandwidth (shm: the copy is the
  // link).
  double cpu_GBps = 0;
  // With copies: a small message's one-way time with both ranks on one CPU (both ends' work and
  // the switch to the rank it wakes); less latency_us, the wake-up of a rank that slept in a
  // receive on this link within a host whose ranks take turns on its cores. 0: wakeup_us.
  double one_cpu_us = 0;
  // With copies: a hop of an 8-byte token around four ranks on one CPU, each of whose messages
  // finds its receiver among three waiters that take turns yielding the CPU; less latency_us,
  // the wake-up of a rank whose core four or more ranks share (between two and four, in
  // proportion). 0: one_cpu_us's.
  double one_cpu_four_us = 0;
  // With copies: a hop of an 8-byte token around four ranks on two CPUs, two on each, every hop
  // to the other CPU, whose receiver takes turns with one other waiter; less latency_us, the
  // wake-up of a rank whose core two ranks share, by a message from another core (one_cpu_us
  // prices one from its own core, the ping-pong's). 0: one_cpu_us's.
  double two_cpus_four_us = 0;
  // A link whose time per byte depends on the message's size (tcp loopback: its kernel's
  // buffers and segments): its measured times by size, ascending. While what the host's ranks
  // touch fits its last-level cache, a message costs what they give at its size (interpolated
  // between them, extended along the last two): on the link, its one-way time less the latency;
  // on the CPUs at each end (with copies), what an exchange takes beyond one way (within a host,
  // where the CPUs are the wire, half of what it takes beyond the latency: cached_end_seconds,
  // the sender's core's and then the receiver's). Past the cache, bandwidth_GBps and cpu_GBps
  // (the rates of the largest messages); where the CPUs are the wire, the cache is the last
  // level (last_level_bytes, where given: the kernel's copies of a message stay there however
  // much the ranks' own copies miss). A message a link within a host copies whole (shm, up to
  // in_place_bytes): each of its two copies, half of what an exchange takes beyond the latency
  // (cached_copy_seconds). Empty: those rates alone (a message copied whole: each copy half the
  // line's time).
  std::vector<SizeTimes> by_size{};
  // With copies, within a host: the longest message its receiver can use where it lies in the
  // link's memory (shm: what it sends at once, 1 MiB). The collectives' fingerprinted messages up
  // to it are sent so (the sender's thread copies each in, the first of the link's two copies:
  // half its time per byte, and is done) and used so (the receiver reduces or copies it out of
  // the link at the rates of reading a peer's lines): no copy out. Other messages up to it are
  // copied in by the sender's core, then out by the receiver's (network.h). 0: every message
  // holds a core at each end at once.
  std::size_t in_place_bytes = 0;
  // With in_place_bytes: the longest message the receiving rank's own thread copies out (shm:
  // 256 KiB; a longer one, the connection's progress thread). Such a message's copies are priced
  // within the last level the ranks' copies find (last_level_bytes, else cache_bytes), whether
  // or not the host's ranks take turns on its cores; a longer one's within cache_bytes (what the
  // host's ranks touch with a core per rank; where they take turns, what a step touches), else
  // within the rank's share of its core's own cache. 0: every one as a longer one.
  std::size_t waiter_bytes = 0;
  double seconds(std::size_t bytes) const;  // latency + bytes / bandwidth
  // The one-CPU time of a message to a rank whose core `sharing` ranks share: up to two,
  // one_cpu_us, or two_cpus_four_us where given for a message from another core
  // (`across_cores`); one_cpu_four_us from four, in proportion between; 0 where none is given.
  double one_cpu_time_us(int sharing, bool across_cores = false) const;
  double cpu_GBps_or_wire() const { return cpu_GBps > 0 ? cpu_GBps : bandwidth_GBps; }
  // Within the cache, by_size's time on the link and on each end's CPUs (0 without by_size).
  double cached_wire_seconds(std::size_t bytes) const;
  double cached_cpu_seconds(std::size_t bytes) const;
  // Within the cache, where the CPUs are the wire (a link within a host whose CPUs move the bytes
  // at cpu_GBps: tcp loopback): the CPU a message takes at each end, half of what an exchange
  // takes beyond the latency (both cores are busy throughout an exchange). 0 without by_size.
  double cached_end_seconds(std::size_t bytes) const;
  // Within the cache, one of the two copies of a message a link within a host copies whole (shm:
  // network.h), the same half of what an exchange takes beyond the latency, at the sizes from
  // kCopyRateBytes up to waiter_bytes (whose exchanges the ranks' own threads moved, as the
  // collectives' messages; a longer one's went through the connection's threads); outside them
  // at the rate of the nearest such size (a short exchange's time beyond the latency is mostly
  // work per message, which the latency on the cores and the wake-ups price). 0 without by_size.
  static constexpr std::size_t kCopyRateBytes = 64 * 1024;
  double cached_copy_seconds(std::size_t bytes) const;
  // The least time the bytes can take on the link, within the cache or past it.
  double fastest_wire_seconds(std::size_t bytes) const;
};

struct Profile {
  std::string name;    // what it describes, e.g. "this machine, shm"
  std::string source;  // where its figures come from
  LinkCost intra;      // between two ranks of one host
  LinkCost inter;      // between ranks of two hosts (and through both hosts' NICs)
  double nic_GBps = 0;
  int nics_per_host = 1;
  // Cores a host's ranks share for their reductions, copies and copying links, each rank staying
  // on one of them (network.h); 0: a core each.
  int cores_per_host = 0;
  // When a host runs more ranks than it has cores, a rank whose receive had to wait was put to
  // sleep: it holds a core this long (the scheduler's wake-up and switch) before it goes on
  // (within the host, a copying link with one_cpu_us has its own).
  double wakeup_us = 0;
  // A core's reduction and copy rates past its own cache, within the last level (`ringlet
  // model fit`: outputs twice a core's cache); past the cache, memory_GBps' share bounds them.
  double reduce_GBps = 0;
  double copy_GBps = 0;
  // A core's reduction in place past its own cache: into its own buffer, of a slice its cache
  // holds (what it just received), as the ring, the tree and the halving algorithms reduce
  // (`ringlet model fit`: a 64 KiB slice summed into each of four times a core's cache). Read and
  // written by its core alone, that buffer finds the whole last level: memory_GBps' share bounds
  // it only past last_level_bytes. 0: at reduce_GBps, bounded as it is.
  double reduce_in_place_GBps = 0;
  // A read of a peer's memory on the same host (cross-memory attach, the direct all-reduce's);
  // 0: at copy_GBps.
  double peer_read_GBps = 0;
  std::size_t slice_bytes = 512 * 1024;  // the message size links prefer (the ring's slices)
  // A host's last-level cache (`ringlet model fit`: the part of it two ranks' copies find) and
  // its memory's bandwidth, all cores together: where the host's
  // ranks' buffers (each the collective's bytes) do not fit the cache, a core moves bytes
  // (copies, reductions, copying links) at no more than its share of memory_GBps. 0: no limit.
  std::size_t cache_bytes = 0;
  double memory_GBps = 0;
  // The last level as all cores copying slice by slice find it (`ringlet model fit`:
  // sliced_copies.h), and what they copy per second past it, all together: where the host's
  // ranks touch more, the part beyond it moves at no more than a core's share of that, whatever
  // the rates above (a copy whose other side stays in cache too: past the last level it does
  // not), but a message a link copies whole: its ring stays in cache, so half of each byte's
  // copy moves at that share, half at the link's rate. 0: no such level. Where the copies find
  // none, `ringlet model fit` gives the level the machine names with no rate past it (0): it
  // still says where the cache of tcp loopback's kernel copies and of a waiter's own ends.
  std::size_t last_level_bytes = 0;
  double past_last_level_GBps = 0;
  // A core's own cache and the copy and reduction rates within it: the part of what a rank
  // touches (three times its buffer: input, output, what it receives into) that fits its share of
  // that cache (the ranks taking turns on a core share it) is copied and reduced at these, the
  // rest at the rates above. 0: no such level.
  std::size_t core_cache_bytes = 0;
  double cached_copy_GBps = 0;
  double cached_reduce_GBps = 0;
  // Memory another core's cache holds, as the shm window's ranks use it: writing what a peer
  // read before (each line taken from that cache) and reading what a peer just wrote (each line
  // fetched from it). 0: at copy_GBps. Past a core's cache (shared_write_past_GBps), the lines
  // a peer read are no longer in its core's cache but in the last level: the part of a rank's
  // window past its share of a core's cache is written at that rate (0: at shared_write_GBps).
  double shared_write_GBps = 0;
  double shared_read_GBps = 0;
  double shared_write_past_GBps = 0;
  // The communicator's own work per op, by algorithm name ("ring", "rd", ...), microseconds on
  // each rank's core before the algorithm's first step: handing the op to the rank's thread, its
  // requests and the algorithm's setup, which the simulation does not run (as NCCL's base
  // latency per algorithm). `ringlet model fit` measures it: an 8-byte all-reduce of each
  // algorithm through two ranks' communicators, less its simulation. Absent: 0.
  std::map<std::string, double> op_us{};
  double op_seconds(const std::string& algorithm) const;

  std::string summary() const;  // one line of its figures
};

// The profile a prediction uses when none is named, and the one the communicator's built-in
// algorithm tables come from (collectives/default_algorithm_tables.cpp): round figures of
// `ringlet model fit` on a 2-core VM, shm between ranks of one host and tcp loopback between
// hosts, with the communicator's work per op (bench/RESULTS.md, 2026-12-02 "auto from the
// model"). It leaves the last-level cache and the memory out (no limit past a core's cache) and
// tcp loopback's times by size (its rates alone).
Profile default_profile();

// Reads a profile; a missing field keeps default_profile()'s, an unknown one, a value that is
// not a positive number or a file that is not JSON is an error naming the file and the field.
Profile read_profile(const std::string& path);
void write_profile(const std::string& path, const Profile& profile);
std::string profile_json(const Profile& profile);

}  // namespace ringlet::model
