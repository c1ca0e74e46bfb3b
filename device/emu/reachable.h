// Memory the emulated device's kernels may touch, as a GPU's may: device memory of any emulated
// device (its own allocations, a peer's mapped over IPC) and pinned host memory. A GPU kernel
// handed anything else (pageable host memory: a std::vector, a stack array) stops with an
// illegal memory access; the emulator's kernels are host code and would read it happily, so
// code that works on the emulator only. The emulator's runtime registers each range it hands
// out; kernels check their pointers against the ranges when they are queued.
#pragma once

#include <cstddef>

#include "core/device.h"

namespace ringlet::device::emu {

void add_reachable(const void* ptr, std::size_t bytes);
void remove_reachable(const void* ptr);

// Throws DeviceError, naming `device` and `what`, unless [ptr, ptr + bytes) lies within one
// registered range.
void check_reachable(core::Device device, const void* ptr, std::size_t bytes, const char* what);

}  // namespace ringlet::device::emu
