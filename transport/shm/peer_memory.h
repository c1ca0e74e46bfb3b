// Cross-memory attach: copying straight out of another process's address space on this host
// (process_vm_readv), one copy where a ring takes two. Linux allows it to a process of the same
// user unless a security policy (Yama ptrace_scope, a container's seccomp filter) forbids it,
// so two ranks find out by trying (probe_peer_memory) before they rely on it.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace ringlet::transport {

// An address in this process holding kPeerMemoryProbe, for a peer to read back.
inline constexpr std::uint64_t kPeerMemoryProbe = 0x52494e474c455421;  // "RINGLET!"
std::uintptr_t peer_memory_probe_address();

// True if reading 8 bytes at `address` in process `pid` works and yields kPeerMemoryProbe.
bool probe_peer_memory(pid_t pid, std::uintptr_t address);

// Copies `bytes` at `remote` in process `pid` into `dst`. Returns 0, or the errno of the read
// that failed (ESRCH: the process is gone; EFAULT: it does not map that range; EPERM: not
// allowed).
int read_peer_memory(pid_t pid, void* dst, std::uintptr_t remote, std::size_t bytes);

}  // namespace ringlet::transport
