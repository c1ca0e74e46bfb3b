// copy_bytes: memcpy as a plain vector loop (64 bytes per iteration), for large copies out of
// memory another process just wrote. Its user is the window all-reduce
// (collectives/window.cpp), which stages into and gathers out of shared windows with it; the
// shm rings copy with memcpy or non-temporal stores (transport/shm/ring.cpp). glibc's memcpy
// copies 2 KiB and more with `rep movsb`, which on the AMD EPYC it was measured on moves a
// 256 KiB block out of memory another core just wrote at about 3 GB/s, against 20 GB/s for
// this loop (the window all-reduce's gather of a 512 KiB buffer: 89 us with memcpy, 25 us with
// copy_bytes). Ranges must not overlap.
#pragma once

#include <cstddef>

namespace ringlet::core {

void copy_bytes(void* dst, const void* src, std::size_t bytes);

}  // namespace ringlet::core
