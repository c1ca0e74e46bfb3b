// process_vm_readv in a loop (it may copy less than asked, e.g. across a range it maps only in
// part), and the probe word both ranks read from each other before using it.
#include "transport/shm/peer_memory.h"

#include <sys/uio.h>

#include <cerrno>

namespace ringlet::transport {
namespace {

const volatile std::uint64_t probe_word = kPeerMemoryProbe;

}  // namespace

std::uintptr_t peer_memory_probe_address() { return reinterpret_cast<std::uintptr_t>(&probe_word); }

bool probe_peer_memory(pid_t pid, std::uintptr_t address) {
  std::uint64_t value = 0;
  return read_peer_memory(pid, &value, address, sizeof value) == 0 && value == kPeerMemoryProbe;
}

int read_peer_memory(pid_t pid, void* dst, std::uintptr_t remote, std::size_t bytes) {
  auto* out = static_cast<char*>(dst);
  while (bytes > 0) {
    iovec local{out, bytes};
    iovec far{reinterpret_cast<void*>(remote), bytes};
    const ssize_t got = ::process_vm_readv(pid, &local, 1, &far, 1, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return got < 0 ? errno : EFAULT;
    out += got;
    remote += static_cast<std::uintptr_t>(got);
    bytes -= static_cast<std::size_t>(got);
  }
  return 0;
}

}  // namespace ringlet::transport
