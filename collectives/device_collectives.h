// Device collectives with no host in the loop: the protocols that run an op over the ranks'
// device windows with flags the device writes and waits for (DeviceIssue: stream memory
// operations), issued from the caller's thread in one go: no progress thread, no host wait, no
// message, so an op can also be captured into a graph and replayed.
//
// Each rank's window (mapped by every rank of the host) is [flags | staged | results]:
// - flags: 2 slots x size 32-bit words; flag(owner, slot, from) is set by rank `from` in rank
//   `owner`'s window;
// - staged: what a rank offers its peers (its input, or the blocks its peers reduce);
// - results: the chunk of a two-shot all-reduce this rank reduced, for its peers to gather.
// A barrier on slot s: rank r sets flag(p, s, r) in every peer's window, then waits until each
// flag(r, s, p) of its own is set and clears it. Every op runs barriers in pairs: slot 0 once
// the staged area is written (peers may read it), slot 1 once this rank has read what it needed
// (peers may overwrite theirs). So consecutive barriers alternate slots, each op starts on
// slot 0 and leaves the flags clear, and an op replayed from a graph runs the same sequence.
// Why no third barrier is needed: a rank writes its staged area before its slot-0 signal of an
// op, and its peers finished reading the previous op's staged areas before their slot-1 signal;
// it writes its results area after its slot-0 wait, after every peer gathered the previous
// piece's results (which each did before its slot-0 signal).
//
// The algorithms (chosen by algorithm_choice.h):
// - one-shot (small messages): stage the input; barrier; reduce every rank's staged copy, in
//   rank order, into the output; barrier. One reduction kernel, two barriers.
// - two-shot (the rest, piece by piece when larger than the staged area): stage the chunks the
//   peers reduce; barrier; reduce this rank's chunk from every rank (in rank order) into the
//   results area; barrier... and gather every rank's reduced chunk from its results area.
//   Each piece's barriers pair up as above (the gather of piece k overlaps nothing).
// Every rank combines the sources in rank order, so every rank's output has the same bits, and
// one-shot and two-shot give the same bits. all_gather, broadcast, reduce_scatter and reduce
// follow the one-shot shape over pieces of the staged area.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "collectives/device_issue.h"
#include "collectives/types.h"

namespace ringlet::collectives {

inline constexpr std::size_t kDeviceFlagBytes = 4096;
inline constexpr int kDeviceMaxRanks = static_cast<int>(kDeviceFlagBytes / 8);

struct DeviceGroup {
  int rank = 0, size = 1;
  std::vector<std::byte*> windows;  // windows[p]: rank p's window as mapped here (empty: 1 rank)
  std::size_t window_bytes = 0;

  std::uint32_t* flag(int owner, int slot, int from) const {
    return reinterpret_cast<std::uint32_t*>(windows[owner]) + slot * size + from;
  }
  // The staged and the results area: each half of what follows the flags, in 64-byte units.
  std::size_t area_bytes() const { return (window_bytes - kDeviceFlagBytes) / 2 / 64 * 64; }
  std::byte* staged(int p) const { return windows[p] + kDeviceFlagBytes; }
  std::byte* results(int p) const { return staged(p) + area_bytes(); }
};

enum class DeviceAlgorithm { one_shot, two_shot };

void device_all_reduce(DeviceIssue& d, const DeviceGroup& g, DeviceAlgorithm algorithm,
                       const void* input, void* output, std::size_t count, DType dtype,
                       ReduceOp op);
// send holds size x recv_count elements; rank r gets block r reduced.
void device_reduce_scatter(DeviceIssue& d, const DeviceGroup& g, const void* send, void* recv,
                           std::size_t recv_count, DType dtype, ReduceOp op);
void device_all_gather(DeviceIssue& d, const DeviceGroup& g, const void* send, void* recv,
                       std::size_t send_count, DType dtype);
void device_broadcast(DeviceIssue& d, const DeviceGroup& g, void* data, std::size_t count,
                      DType dtype, int root);
// recv is written on root only.
void device_reduce(DeviceIssue& d, const DeviceGroup& g, const void* send, void* recv,
                   std::size_t count, DType dtype, ReduceOp op, int root);

}  // namespace ringlet::collectives
