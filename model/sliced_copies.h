// The last-level cache and the memory past it as the collectives' copies find them: every core
// copying a buffer of its own at once, a slice at a time (core::copy of 256 KiB, as the
// collectives and the shm ring copy: ordinary stores), each buffer at a page (core/page_buffer.h:
// two buffers from the heap 16 bytes apart modulo a page made each slice's memcpy crawl at 2-3
// GB/s, and the cache look slower than the memory). glibc's memcpy streams past the cache
// (non-temporal stores) only on a copy of a large part of the last level, so one memcpy of
// hundreds of MiB moves bytes faster than the collectives' copies of the same bytes do (`ringlet
// model fit`'s memory_GBps is such a copy: 22.8 GB/s, against 13.6-14.0 slice by slice, on a
// 2-vCPU VM).
#pragma once

#include <cstddef>
#include <vector>

namespace ringlet::model {

struct SlicedRate {
  std::size_t per_core_bytes = 0;  // each core's buffer (it copies it into another as large)
  double GBps = 0;                 // bytes copied per second, all cores together
};

struct SlicedCopies {
  std::vector<SlicedRate> rates;  // by buffer size, ascending
  // The memory all cores' buffers take (both sides) where the rate falls halfway from the
  // smallest size's to the largest's (between the two sizes around it, in proportion along the
  // powers of two); 0 where the rates never fall by a quarter (no knee within the sizes measured).
  std::size_t last_level_bytes = 0;
  double past_GBps = 0;  // the rate at the largest size, where a knee was seen; else 0
};

// Every one of `cores` threads copies a buffer of `per_core` bytes of its own into another as
// large at once, `slice` bytes per copy (per_core: one memcpy), over and over for at least
// 64 MiB a run: bytes copied per second, all together, the median of `runs` runs after an untimed
// one.
double all_cores_copying_GBps(int cores, std::size_t per_core, std::size_t slice, int runs);

// The knee, as above, of rates measured with `cores` cores.
SlicedCopies sliced_knee(std::vector<SlicedRate> rates, int cores);

// Measures the rates with `cores` threads, each copying its own buffer, from `least_per_core`
// (past a core's own cache) to `most_per_core` by powers of two, the median of `runs` runs each.
SlicedCopies measure_sliced_copies(int cores, std::size_t least_per_core, std::size_t most_per_core,
                                   int runs);

}  // namespace ringlet::model
