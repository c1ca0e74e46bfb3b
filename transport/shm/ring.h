// ShmRing: a single-producer single-consumer byte ring in a shared mapping, with adaptive waiting
// (futex.h: spin a few microseconds, then yield, then sleep on a process-shared futex).
// Invariants: head and tail only grow (bytes ever written / read); 0 <= head - tail <= capacity;
// only the producer stores head, only the consumer stores tail; capacity is a power of two.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <initializer_list>

namespace ringlet::transport {

// The ring's control block, placed in shared memory. Only lock-free atomics, so it works across
// processes. head and tail sit on their own cache lines so producer and consumer do not
// false-share; each sequence word is a futex a side sleeps on.
struct ShmRingControl {
  alignas(64) std::atomic<std::uint64_t> head;  // bytes ever published by the producer
  alignas(64) std::atomic<std::uint64_t> tail;  // bytes ever consumed by the consumer
  // Bumped by the producer when the consumer announced it sleeps ("data available").
  alignas(64) std::atomic<std::uint32_t> data_seq;
  std::atomic<std::uint32_t> consumer_sleeping;
  // Bumped by the consumer when the producer announced it sleeps ("space available").
  alignas(64) std::atomic<std::uint32_t> space_seq;
  std::atomic<std::uint32_t> producer_sleeping;
};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<std::uint32_t>) == 4, "futex words must be 32-bit");

// How read_some copies out: `streaming` bypasses the cache for the destination (for large
// messages, whose start would be evicted by their end anyway).
enum class CopyMode { cached, streaming };

// A non-owning view of one ring: control block + `capacity` data bytes, both in the mapping.
// write_* belong to the one producer thread, read_* to the one consumer thread.
class ShmRing {
 public:
  ShmRing() = default;
  ShmRing(ShmRingControl* control, std::byte* data, std::size_t capacity);

  // Puts a fresh control block at `control` (done once, by the segment's creator).
  static void init(ShmRingControl* control);

  // Copies up to n bytes in (bounded by free space and a publish granularity, so the consumer
  // can start copying out while the producer goes on); returns the bytes written (0 if full).
  std::size_t write_some(const void* src, std::size_t n);
  // Writes the pieces in order as one publish if all fit now; false (nothing written)
  // otherwise. The fast path for small messages: one fence and one wake check for the frame
  // and its payload's pieces. A piece with no data is skipped over: its bytes are published as
  // they lie (a skip the consumer steps over unread, see rewind_bytes).
  struct Piece {
    const void* data;
    std::size_t bytes;
  };
  bool try_write_all(std::initializer_list<Piece> pieces);
  // Where the ring is empty (the consumer has read all) and `total` bytes and a quarter of the
  // ring fit before the write position: the bytes from there to the ring's end. A writer that
  // skips them puts its next `total` bytes at the ring's start, on lines written lately that a
  // cache still holds, rather than on the next ones round the ring, evicted long since: a stream
  // of messages cycles through a quarter of the ring and a message or two. Until the consumer
  // steps over the skip, the writer has the space before it: still a quarter of the ring. Else 0;
  // also 0 in a pass round the ring (the writes since the position last crossed the ring's end)
  // that carried a write of more than kRewindLongestBytes, and for such a message itself. Their
  // lines are better left to age: where the two ends' cores share no cache, writing a line the
  // peer's core read a message or two ago takes it back from that core (bench/RESULTS.md,
  // 2026-12-03 "The ring's start and the peer's cache"; much of the slowness measured there was
  // memcpy's at the gap a message at the ring's start has to its reader's buffer, which
  // core::copy now avoids: "A copy's gap").
  // Always 0 once set_going_back(false): where the writer's and reader's cores share no cache,
  // every line at the start is one the peer's core read lately (ShmConnection decides it).
  static constexpr std::size_t kRewindLongestBytes = 256 * 1024 + 64;  // 256 KiB and its frame
  std::size_t rewind_bytes(std::size_t total);
  void set_going_back(bool on) { going_back_ = on; }
  // The reader's side of it: consumes n readable bytes that end at the ring's end; false, nothing
  // consumed, where they are not all readable or end elsewhere (no skip a writer left).
  bool skip_to_start(std::size_t n);
  // Copies up to n bytes out; returns the bytes read (0 if empty).
  std::size_t read_some(void* dst, std::size_t n, CopyMode mode = CopyMode::cached);
  // Copies up to n readable bytes out without consuming them; returns how many.
  std::size_t peek(void* dst, std::size_t n);
  // The n readable bytes that start `offset` bytes in, where they lie in the ring, if they are
  // all readable and do not wrap round its end; else null. They stay the consumer's to read
  // until it consumes them.
  const std::byte* view(std::size_t offset, std::size_t n);
  // Consumes n readable bytes without copying them (after reading them through view).
  void consume(std::size_t n);

  std::size_t readable() const;
  std::size_t writable() const;

  // Waits until at least `bytes` of data (wait_readable) or some space (wait_writable) is
  // there, at most about max_wait; returns whether it is. Callers loop, checking shutdown and
  // peer liveness between calls, so a dead peer or a stopping connection is never waited on for
  // long. A reader that needs a whole message names its length: one that waited for any byte
  // would find part of it there and look again at once, holding a core its writer may need.
  bool wait_readable(std::chrono::microseconds max_wait, std::size_t bytes = 1);
  bool wait_writable(std::chrono::microseconds max_wait);

  // Wakes whoever sleeps on this ring (either side), e.g. on shutdown or when closing.
  void wake_all();

  std::size_t capacity() const { return capacity_; }

 private:
  void copy_in(std::uint64_t position, const void* src, std::size_t n);
  void copy_out(std::uint64_t position, void* dst, std::size_t n, CopyMode mode) const;
  // Free space (producer) / readable bytes (consumer), re-reading the other side's counter only
  // when the cached value shows less than `wanted`.
  std::size_t space_for(std::uint64_t head, std::size_t wanted);
  std::size_t data_for(std::uint64_t tail, std::size_t wanted);
  // Stores the counter, then wakes the other side if it announced it sleeps.
  void publish_head(std::uint64_t head);
  void publish_tail(std::uint64_t tail);
  // Before a write of n bytes at head: the pass it falls in, and whether that pass is long.
  void note_write(std::uint64_t head, std::size_t n);

  ShmRingControl* control_ = nullptr;
  std::byte* data_ = nullptr;
  std::size_t capacity_ = 0;
  std::size_t mask_ = 0;
  std::uint64_t cached_tail_ = 0;  // producer's last view of tail (saves a shared-line read)
  // The producer's pass round the ring: where it ends (a head value, a multiple of the capacity)
  // and whether it carried a write longer than kRewindLongestBytes.
  std::uint64_t pass_end_ = 0;
  bool long_pass_ = false;
  bool going_back_ = true;         // the producer's: whether rewind_bytes may go back at all
  std::uint64_t cached_head_ = 0;  // consumer's last view of head
};

}  // namespace ringlet::transport
