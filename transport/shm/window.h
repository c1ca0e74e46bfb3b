// SharedWindow: a block of memory one rank writes and the other ranks of its host map into
// their own address space, so a peer reads it with plain loads (memcpy speed) instead of a
// cross-memory-attach copy (process_vm_readv pins every page it touches: 5x slower here).
// The owner creates it as an anonymous memfd; a peer opens it by its address
// "<pid>/<fd>/<bytes>" through /proc/<pid>/fd/<fd> (allowed to a process that may also read
// the owner's memory), maps it and closes the descriptor. The memory lives as long as any
// mapping of it, so a peer that dies leaves nothing behind: no name in /dev/shm to unlink.
// Nothing here orders reads against writes: the collective that uses windows does, through
// messages on its connections.
#pragma once

#include <cstddef>
#include <string>

namespace ringlet::transport {

class SharedWindow {
 public:
  // A fresh, zero-filled window of `bytes` in this process (pages are faulted on first touch).
  static SharedWindow create(std::size_t bytes);
  // Maps the window a peer published as `address` (its address()). Error naming the address
  // and the failing call when it cannot (another pid namespace, ptrace policy, a closed fd).
  static SharedWindow open(const std::string& address);

  SharedWindow(SharedWindow&& other) noexcept;
  SharedWindow& operator=(SharedWindow&& other) noexcept;
  SharedWindow(const SharedWindow&) = delete;
  SharedWindow& operator=(const SharedWindow&) = delete;
  ~SharedWindow();

  // For a created window, while its descriptor is open: where peers find it.
  std::string address() const;
  // Closes the descriptor peers open it through (once every peer has mapped it); the memory
  // stays mapped.
  void close_handle();

  std::byte* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  SharedWindow() = default;
  void release();

  std::byte* data_ = nullptr;
  std::size_t bytes_ = 0;
  int fd_ = -1;
};

}  // namespace ringlet::transport
