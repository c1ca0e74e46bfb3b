// copy: memcpy, except at the offsets where glibc's memcpy crawls. From 2 KiB up to about a core's
// own cache (its `rep_movsb_stop_threshold`) glibc copies with `rep movsb`, which on the AMD EPYC
// cores measured here (FSRM) moves 2-3 GB/s instead of 40 where the destination lies 1-31 bytes
// past the source modulo 4 KiB (bench/copy_gap_bench; bench/RESULTS.md, 2026-12-03 "A copy's gap"):
// a shm ring's message starts 8 bytes into its frame and a malloc'd buffer 16 bytes into a page,
// so a message the ring wrote at its start was read out at that speed. There copy() takes
// copy_bytes' loop instead, where this CPU's memcpy crawls: other CPUs (AMD's Zen 5 with AVX-512)
// copy at those gaps faster than the loop does, and there copy() stays memcpy. The project's
// copies of message-sized blocks go through it, the window all-reduce's too: the loop it used
// everywhere (a 512 KiB gather at 25 us against memcpy's 89 where memcpy crawls, a malloc'd
// output lying 16 bytes past its page-aligned window: copy() keeps the loop there) took a 2-rank
// window all-reduce of 1-4 MiB to 3x memcpy's time on Zen 5 with the vCPUs apart
// (bench/RESULTS.md, 2026-12-05 "The window's copies").
//
// copy_bytes: memcpy as a plain vector loop (64 bytes per iteration), what copy() takes at the
// slow gaps. Ranges must not overlap.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ringlet::core {

// Where `rep movsb` crawls: the destination 1-63 bytes past the source modulo a 4 KiB page (the
// slow gaps measured are 1-31; the margin costs nothing, the loop being as fast there).
inline bool copy_gap_is_slow(const void* dst, const void* src) {
  const auto gap =
      (reinterpret_cast<std::uintptr_t>(dst) - reinterpret_cast<std::uintptr_t>(src)) & 4095u;
  return gap != 0 && gap < 64;
}

// Whether memcpy crawls at a slow gap on this CPU: measured once per process, on its first call
// (about 20 us), as 16 KiB copied at a gap of 8 bytes taking over twice the loop's time.
bool memcpy_crawls_at_a_gap();

void copy(void* dst, const void* src, std::size_t bytes);
void copy_bytes(void* dst, const void* src, std::size_t bytes);

}  // namespace ringlet::core
