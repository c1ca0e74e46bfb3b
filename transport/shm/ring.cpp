// ShmRing: copies in and out of the ring, publishing head and tail, and waiting for data or
// space (futex.h has the sleep/wake protocol).
#include "transport/shm/ring.h"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "core/copy.h"
#include "transport/shm/futex.h"

namespace ringlet::transport {
namespace {

// Bytes published per write_some/read_some: small enough that the other side starts copying while
// this one goes on (and that a chunk stays in cache between the two copies), large enough that
// the per-publish fence and wake check are noise.
constexpr std::size_t kPublishBytes = 256 * 1024;

// memcpy, but not at the gaps where its `rep movsb` crawls: a message the ring holds 8 bytes into
// its frame, read into a buffer 16 bytes into a page, is one (core/copy.h).
void plain_copy(std::byte* dst, const std::byte* src, std::size_t n) { core::copy(dst, src, n); }

// Copies with non-temporal stores: the destination is not read for ownership first and does not
// evict the ring from the cache, which is most of the memory traffic of a large receive.
void stream_copy(std::byte* dst, const std::byte* src, std::size_t n) {
#if defined(__SSE2__)
  const std::size_t lead = (16 - (reinterpret_cast<std::uintptr_t>(dst) & 15)) & 15;
  if (n < lead + 256) {
    std::memcpy(dst, src, n);
    return;
  }
  std::memcpy(dst, src, lead);
  dst += lead;
  src += lead;
  n -= lead;
  for (; n >= 64; dst += 64, src += 64, n -= 64) {
    const auto* in = reinterpret_cast<const __m128i*>(src);
    auto* out = reinterpret_cast<__m128i*>(dst);
    const __m128i a = _mm_loadu_si128(in), b = _mm_loadu_si128(in + 1);
    const __m128i c = _mm_loadu_si128(in + 2), d = _mm_loadu_si128(in + 3);
    _mm_stream_si128(out, a);
    _mm_stream_si128(out + 1, b);
    _mm_stream_si128(out + 2, c);
    _mm_stream_si128(out + 3, d);
  }
  std::memcpy(dst, src, n);
  _mm_sfence();  // streaming stores are weakly ordered: make them visible before tail moves
#else
  std::memcpy(dst, src, n);
#endif
}

}  // namespace

ShmRing::ShmRing(ShmRingControl* control, std::byte* data, std::size_t capacity)
    : control_(control), data_(data), capacity_(capacity), mask_(capacity - 1) {
  cached_tail_ = control_->tail.load(std::memory_order_acquire);
  cached_head_ = control_->head.load(std::memory_order_acquire);
}

void ShmRing::init(ShmRingControl* control) {
  new (control) ShmRingControl{};  // value-initialized: counters and futex words start at 0
}

void ShmRing::copy_in(std::uint64_t position, const void* src, std::size_t n) {
  if (n == 0) return;  // src may be null for an empty message
  const std::size_t offset = static_cast<std::size_t>(position) & mask_;
  const std::size_t first = std::min(n, capacity_ - offset);
  const auto* bytes = static_cast<const std::byte*>(src);
  plain_copy(data_ + offset, bytes, first);
  if (n > first) plain_copy(data_, bytes + first, n - first);
}

void ShmRing::copy_out(std::uint64_t position, void* dst, std::size_t n, CopyMode mode) const {
  if (n == 0) return;
  const std::size_t offset = static_cast<std::size_t>(position) & mask_;
  const std::size_t first = std::min(n, capacity_ - offset);
  auto* bytes = static_cast<std::byte*>(dst);
  const auto copy = mode == CopyMode::streaming ? stream_copy : plain_copy;
  copy(bytes, data_ + offset, first);
  if (n > first) copy(bytes + first, data_, n - first);
}

std::size_t ShmRing::space_for(std::uint64_t head, std::size_t wanted) {
  std::size_t space = capacity_ - static_cast<std::size_t>(head - cached_tail_);
  if (space < wanted) {
    cached_tail_ = control_->tail.load(std::memory_order_acquire);
    space = capacity_ - static_cast<std::size_t>(head - cached_tail_);
  }
  return space;
}

std::size_t ShmRing::data_for(std::uint64_t tail, std::size_t wanted) {
  std::size_t avail = static_cast<std::size_t>(cached_head_ - tail);
  if (avail < wanted) {
    cached_head_ = control_->head.load(std::memory_order_acquire);
    avail = static_cast<std::size_t>(cached_head_ - tail);
  }
  return avail;
}

void ShmRing::publish_head(std::uint64_t head) {
  control_->head.store(head, std::memory_order_release);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (control_->consumer_sleeping.load(std::memory_order_relaxed) != 0) {
    control_->data_seq.fetch_add(1, std::memory_order_release);
    futex_wake_all(&control_->data_seq);
  }
}

void ShmRing::publish_tail(std::uint64_t tail) {
  control_->tail.store(tail, std::memory_order_release);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (control_->producer_sleeping.load(std::memory_order_relaxed) != 0) {
    control_->space_seq.fetch_add(1, std::memory_order_release);
    futex_wake_all(&control_->space_seq);
  }
}

void ShmRing::note_write(std::uint64_t head, std::size_t n) {
  if (head >= pass_end_) {  // crossed the ring's end since the last write: a new pass
    pass_end_ = (head & ~static_cast<std::uint64_t>(mask_)) + capacity_;
    long_pass_ = false;
  }
  long_pass_ = long_pass_ || n > kRewindLongestBytes;
}

std::size_t ShmRing::write_some(const void* src, std::size_t n) {
  const std::uint64_t head = control_->head.load(std::memory_order_relaxed);  // ours alone
  note_write(head, n);
  const std::size_t k = std::min({n, space_for(head, std::min(n, kPublishBytes)), kPublishBytes});
  if (k == 0) return 0;
  copy_in(head, src, k);
  publish_head(head + k);
  return k;
}

bool ShmRing::try_write_all(std::initializer_list<Piece> pieces) {
  const std::uint64_t head = control_->head.load(std::memory_order_relaxed);
  std::size_t total = 0;
  for (const Piece& piece : pieces) total += piece.bytes;
  if (space_for(head, total) < total) return false;
  note_write(head, total);
  std::uint64_t at = head;
  for (const Piece& piece : pieces) {
    if (piece.data != nullptr) copy_in(at, piece.data, piece.bytes);
    at += piece.bytes;
  }
  publish_head(at);
  return true;
}

std::size_t ShmRing::rewind_bytes(std::size_t total) {
  const std::uint64_t head = control_->head.load(std::memory_order_relaxed);  // ours alone
  const std::size_t offset = static_cast<std::size_t>(head) & mask_;
  const bool long_pass = head < pass_end_ && long_pass_;
  if (!going_back_ || long_pass || total > kRewindLongestBytes || offset < capacity_ / 4 + total)
    return 0;
  cached_tail_ = control_->tail.load(std::memory_order_acquire);
  return cached_tail_ == head ? capacity_ - offset : 0;
}

bool ShmRing::skip_to_start(std::size_t n) {
  const std::uint64_t tail = control_->tail.load(std::memory_order_relaxed);  // ours alone
  if (((tail + n) & mask_) != 0 || data_for(tail, n) < n) return false;
  publish_tail(tail + n);
  return true;
}

std::size_t ShmRing::read_some(void* dst, std::size_t n, CopyMode mode) {
  const std::uint64_t tail = control_->tail.load(std::memory_order_relaxed);  // ours alone
  const std::size_t k = std::min({n, data_for(tail, std::min(n, kPublishBytes)), kPublishBytes});
  if (k == 0) return 0;
  copy_out(tail, dst, k, mode);
  publish_tail(tail + k);
  return k;
}

std::size_t ShmRing::peek(void* dst, std::size_t n) {
  const std::uint64_t tail = control_->tail.load(std::memory_order_relaxed);
  const std::size_t k = std::min(n, data_for(tail, n));
  copy_out(tail, dst, k, CopyMode::cached);
  return k;
}

const std::byte* ShmRing::view(std::size_t offset, std::size_t n) {
  const std::uint64_t tail = control_->tail.load(std::memory_order_relaxed);
  if (data_for(tail, offset + n) < offset + n) return nullptr;
  const std::size_t at = static_cast<std::size_t>((tail + offset) & mask_);
  return at + n <= capacity_ ? data_ + at : nullptr;
}

void ShmRing::consume(std::size_t n) {
  publish_tail(control_->tail.load(std::memory_order_relaxed) + n);
}

std::size_t ShmRing::readable() const {
  return static_cast<std::size_t>(control_->head.load(std::memory_order_acquire) -
                                  control_->tail.load(std::memory_order_relaxed));
}

std::size_t ShmRing::writable() const {
  return capacity_ - static_cast<std::size_t>(control_->head.load(std::memory_order_relaxed) -
                                              control_->tail.load(std::memory_order_acquire));
}

bool ShmRing::wait_readable(std::chrono::microseconds max_wait, std::size_t bytes) {
  const std::size_t enough = std::clamp<std::size_t>(bytes, 1, capacity_);
  const auto ready = [this, enough] { return readable() >= enough; };
  // Part of it is there: its writer is copying the rest in. Looking again between other
  // threads' turns finds it without the wake-up a sleep would cost once it is all there.
  if (readable() > 0) return spin_then_yield(ready);
  return wait_until_ready(ready, control_->data_seq, control_->consumer_sleeping, max_wait);
}

bool ShmRing::wait_writable(std::chrono::microseconds max_wait) {
  return wait_until_ready([this] { return writable() > 0; }, control_->space_seq,
                          control_->producer_sleeping, max_wait);
}

void ShmRing::wake_all() {
  control_->data_seq.fetch_add(1, std::memory_order_seq_cst);
  control_->space_seq.fetch_add(1, std::memory_order_seq_cst);
  futex_wake_all(&control_->data_seq);
  futex_wake_all(&control_->space_seq);
}

}  // namespace ringlet::transport
