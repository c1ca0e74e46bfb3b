// Device windows of ranks that are threads of one process. Such ranks use each other's windows
// as plain pointers (no IPC handle, whose mapping would keep the memory alive), so a rank that
// freed its window as its space closed could pull it from under a peer still reading it: the
// window all-reduce's gather reads the peers' windows, and nothing after an op's last gather
// tells the owner that its peers are done. A window here is freed when the last space holding
// it lets go: its owner's and each peer thread's, each after its own stream has run.
#pragma once

#include <cstddef>
#include <memory>

#include "device/runtime.h"

namespace ringlet::collectives {

using SharedWindow = std::shared_ptr<std::byte>;

// `bytes` of `runtime`'s device memory, freed on it once no holder is left; null when the device
// has no room. Peer threads find it by its address.
SharedWindow allocate_thread_window(device::Runtime& runtime, std::size_t bytes);

// The window at `address`, which a rank of this process allocated above and still holds; null
// when none is (its rank already left).
SharedWindow hold_thread_window(const void* address);

}  // namespace ringlet::collectives
