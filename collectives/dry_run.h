// DryRun: an op run for its schedule alone, with no data in it (the simulated network, model/).
// Its buffers are placeholders, never read or written. The algorithms' data steps go through
// ChannelContext's helpers (copy_within, reduce_within, rotate_within, scratch_bytes,
// send_fingerprinted, check_message), which tell the dry run instead of doing them: a copy or a
// reduction costs the time its model gives it, a message carries its length and no bytes, and a
// received message's length is still checked (there is no fingerprint in it to read).
#pragma once

#include <cstddef>

namespace ringlet::collectives {

class DryRun {
 public:
  virtual ~DryRun() = default;
  virtual void copied(std::size_t bytes) = 0;
  virtual void reduced(std::size_t bytes) = 0;  // bytes of the reduction's output
  // A reduction into another buffer than the operand it reads there (an out-of-place op's first
  // reductions: out of the input into the output), whose output lines are fetched before they are
  // written: one stream of memory more than in place.
  virtual void reduced_apart(std::size_t bytes) { reduced(bytes); }
  // The same with memory other cores' caches hold (the shm window's): a copy into memory the
  // peers read (published), a copy or a reduction out of memory a peer just wrote.
  virtual void published(std::size_t bytes) { copied(bytes); }
  virtual void copied_from_peer(std::size_t bytes) { copied(bytes); }
  virtual void reduced_from_peer(std::size_t bytes) { reduced(bytes); }
  // An address for `bytes` of memory the op may point at but never touches.
  virtual char* placeholder(std::size_t bytes) = 0;
};

}  // namespace ringlet::collectives
