// The shm byte ring, its adaptive waits, the segment holding two rings, and the futex /
// process-liveness helpers.
// Sleep/wake protocol (no lost wake-ups): a side about to sleep announces it (store flag,
// seq_cst fence, re-check the ring) and sleeps only if the futex word still holds the value read
// before the announcement; the other side publishes (store head/tail, seq_cst fence) and wakes
// only when it sees the announcement. One of the two always sees the other's store.
#include "transport/shm/ring.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <system_error>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "core/env.h"
#include "core/error.h"

namespace ringlet::transport {
namespace {

// Adaptive waiting. Spinning catches the common case (the other side is mid-copy on another core)
// without a syscall; yielding lets a co-scheduled peer run when cores are oversubscribed (4 ranks
// on 2 cores); the futex sleep then costs nothing while a side is idle.
constexpr auto kSpinTime = std::chrono::microseconds(8);
constexpr auto kYieldTime = std::chrono::microseconds(40);

// Bytes published per write_some/read_some: small enough that the other side starts copying while
// this one goes on (and that a chunk stays in cache between the two copies), large enough that
// the per-publish fence and wake check are noise.
constexpr std::size_t kPublishBytes = 256 * 1024;

constexpr std::uint64_t kMagic = 0x31746d68732d7772ULL;  // "rw-shmt1", stored last by the creator
constexpr std::uint32_t kVersion = 1;
// Page 0: the header at 0 and the two ring control blocks at 256 and 512; the rings' data from
// page 1 on, so data pages never share a cache line with control words.
constexpr std::size_t kHeaderBytes = 4096;
constexpr std::size_t kControlOffset[2] = {256, 512};

struct SegmentHeader {
  std::atomic<std::uint64_t> magic;
  std::uint32_t version;
  std::int32_t ranks[2];  // side 0 = creator (lower rank), side 1 = opener
  std::uint64_t ring_bytes;
  std::atomic<std::int32_t> pids[2];
  std::uint64_t pid_namespaces[2];       // a pid means something to the peer only in the same one
  std::atomic<std::uint32_t> attached;   // futex word: 1 once the opener has mapped the segment
  std::atomic<std::uint32_t> closed[2];  // side i destroyed or aborted its end
};
static_assert(sizeof(SegmentHeader) <= kControlOffset[0]);
static_assert(sizeof(ShmRingControl) <= kControlOffset[1] - kControlOffset[0]);
static_assert(kControlOffset[1] + sizeof(ShmRingControl) <= kHeaderBytes);

SegmentHeader* header_of(void* base) { return static_cast<SegmentHeader*>(base); }

std::string errno_text() { return std::generic_category().message(errno); }

std::size_t configured_ring_bytes() {
  const auto bytes = core::env_int("RINGLET_SHM_RING_BYTES", 4 << 20, 4096, std::int64_t{1} << 30);
  RINGLET_CHECK((bytes & (bytes - 1)) == 0, ValueError, "environment variable ",
                "RINGLET_SHM_RING_BYTES=", bytes, " is not a power of two");
  return static_cast<std::size_t>(bytes);
}

// The identity of this process's pid namespace (0 if unknown).
std::uint64_t pid_namespace() {
  struct stat info {};
  return stat("/proc/self/ns/pid", &info) == 0 ? static_cast<std::uint64_t>(info.st_ino) : 0;
}

std::string random_nonce() {
  std::random_device device;
  const std::uint64_t value = (std::uint64_t{device()} << 32) ^ device();
  static constexpr char kHex[] = "0123456789abcdef";
  std::string text(16, '0');
  for (int i = 0; i < 16; ++i) text[i] = kHex[(value >> (60 - 4 * i)) & 0xf];
  return text;
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

void plain_copy(std::byte* dst, const std::byte* src, std::size_t n) { std::memcpy(dst, src, n); }

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

std::uint32_t* futex_address(std::atomic<std::uint32_t>* word) {
  // std::atomic<uint32_t> is a lock-free 4-byte object holding the value (see the static_assert
  // in ring.h), which is what the kernel's futex word is.
  return reinterpret_cast<std::uint32_t*>(word);
}

// Spins, then yields, until ready() or the spin budget is spent; true if ready.
template <class Ready>
bool spin_then_yield(Ready ready) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  for (int i = 1;; ++i) {
    if (ready()) return true;
    cpu_relax();
    if (i % 32 == 0 && Clock::now() - start > kSpinTime) break;
  }
  while (Clock::now() - start < kSpinTime + kYieldTime) {
    if (ready()) return true;
    sched_yield();
  }
  return ready();
}

// Spins, yields, then sleeps on the futex word `seq`, announced through `sleeping` so the other
// side knows to wake it (the fence orders the announcement before the last check of ready()).
template <class Ready>
bool wait_until_ready(Ready ready, std::atomic<std::uint32_t>& seq,
                      std::atomic<std::uint32_t>& sleeping, std::chrono::microseconds max_wait) {
  if (spin_then_yield(ready)) return true;
  const std::uint32_t observed = seq.load(std::memory_order_acquire);
  sleeping.store(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!ready()) futex_wait(&seq, observed, max_wait);
  sleeping.store(0, std::memory_order_relaxed);
  return ready();
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
  std::memcpy(data_ + offset, bytes, first);
  if (n > first) std::memcpy(data_, bytes + first, n - first);
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

std::size_t ShmRing::write_some(const void* src, std::size_t n) {
  const std::uint64_t head = control_->head.load(std::memory_order_relaxed);  // ours alone
  const std::size_t k = std::min({n, space_for(head, std::min(n, kPublishBytes)), kPublishBytes});
  if (k == 0) return 0;
  copy_in(head, src, k);
  publish_head(head + k);
  return k;
}

bool ShmRing::try_write_all(const void* a, std::size_t na, const void* b, std::size_t nb) {
  const std::uint64_t head = control_->head.load(std::memory_order_relaxed);
  if (space_for(head, na + nb) < na + nb) return false;
  copy_in(head, a, na);
  copy_in(head + na, b, nb);
  publish_head(head + na + nb);
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

std::size_t ShmRing::readable() const {
  return static_cast<std::size_t>(control_->head.load(std::memory_order_acquire) -
                                  control_->tail.load(std::memory_order_relaxed));
}

std::size_t ShmRing::writable() const {
  return capacity_ - static_cast<std::size_t>(control_->head.load(std::memory_order_relaxed) -
                                              control_->tail.load(std::memory_order_acquire));
}

bool ShmRing::wait_readable(std::chrono::microseconds max_wait) {
  return wait_until_ready([this] { return readable() > 0; }, control_->data_seq,
                          control_->consumer_sleeping, max_wait);
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

void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected,
                std::chrono::microseconds timeout) {
  const auto us = std::max<std::int64_t>(timeout.count(), 1);
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(us / 1000000);
  ts.tv_nsec = static_cast<long>((us % 1000000) * 1000);
  // Not FUTEX_PRIVATE: the word is in a mapping shared between processes. EAGAIN (value
  // changed), EINTR and ETIMEDOUT all just return; callers re-check their condition.
  syscall(SYS_futex, futex_address(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futex_wake_all(std::atomic<std::uint32_t>* word) {
  syscall(SYS_futex, futex_address(word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

ProcessWatch::ProcessWatch(pid_t pid) : pid_(pid), same_process_(pid == getpid()) {
#ifdef SYS_pidfd_open
  if (!same_process_ && pid > 0) pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#endif
}

ProcessWatch::~ProcessWatch() {
  if (pidfd_ >= 0) close(pidfd_);
}

ProcessWatch::ProcessWatch(ProcessWatch&& other) noexcept
    : pid_(other.pid_),
      pidfd_(std::exchange(other.pidfd_, -1)),
      same_process_(other.same_process_) {}

ProcessWatch& ProcessWatch::operator=(ProcessWatch&& other) noexcept {
  if (this != &other) {
    if (pidfd_ >= 0) close(pidfd_);
    pid_ = other.pid_;
    pidfd_ = std::exchange(other.pidfd_, -1);
    same_process_ = other.same_process_;
  }
  return *this;
}

bool ProcessWatch::exited() const {
  if (same_process_ || pid_ <= 0) return false;
  if (pidfd_ >= 0) {
    pollfd p{pidfd_, POLLIN, 0};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0;
  }
  // Fallback: kill(pid, 0) still succeeds on a zombie, so also read its state from /proc.
  if (kill(pid_, 0) != 0 && errno == ESRCH) return true;
  std::ifstream stat("/proc/" + std::to_string(pid_) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const auto paren = line.rfind(')');  // the command name may contain spaces and parentheses
  if (paren == std::string::npos || paren + 2 >= line.size()) return false;
  const char state = line[paren + 2];
  return state == 'Z' || state == 'X';
}

// ---- ShmSegment ----

ShmSegment ShmSegment::create(int local_rank, int peer_rank) {
  ShmSegment segment;
  segment.creator_ = true;
  segment.ring_bytes_ = configured_ring_bytes();
  segment.mapped_bytes_ = kHeaderBytes + 2 * segment.ring_bytes_;
  // The pid lets a test (or an operator) tell whose segment a leftover is; the nonce makes the
  // name unguessable and unique across jobs and reconnects.
  segment.name_ =
      core::str("/ringlet-shm-", getpid(), "-", random_nonce(), "-", local_rank, "-", peer_rank);
  const auto context = [&] {
    return core::str("rank ", local_rank, ": cannot create shm segment ", segment.name_,
                     " for peer rank ", peer_rank, ": ");
  };
  const int fd = shm_open(segment.name_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  RINGLET_CHECK(fd >= 0, Error, context(), "shm_open: ", errno_text());
  segment.linked_ = true;  // from here on, a failure unlinks the name again (destructor)
  // Reserve the memory now: a sparse file on a full tmpfs would SIGBUS on first touch.
  const int err = posix_fallocate(fd, 0, static_cast<off_t>(segment.mapped_bytes_));
  if (err != 0) {
    close(fd);
    RINGLET_THROW(
        Error, context(), "reserving ", segment.mapped_bytes_,
        " bytes in /dev/shm: ", std::generic_category().message(err),
        " (free space in /dev/shm, lower RINGLET_SHM_RING_BYTES, or RINGLET_TRANSPORT=tcp)");
  }
  void* base = mmap(nullptr, segment.mapped_bytes_, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_POPULATE, fd, 0);
  const std::string mmap_error = base == MAP_FAILED ? errno_text() : "";
  close(fd);
  RINGLET_CHECK(base != MAP_FAILED, Error, context(), "mmap: ", mmap_error);
  segment.base_ = base;

  auto* header = new (base) SegmentHeader{};  // value-initialized: every flag and pid 0
  header->version = kVersion;
  header->ranks[0] = local_rank;
  header->ranks[1] = peer_rank;
  header->ring_bytes = segment.ring_bytes_;
  header->pid_namespaces[0] = pid_namespace();
  header->pids[0].store(getpid(), std::memory_order_relaxed);
  for (const std::size_t offset : kControlOffset) {
    ShmRing::init(reinterpret_cast<ShmRingControl*>(static_cast<std::byte*>(base) + offset));
  }
  header->magic.store(kMagic, std::memory_order_release);
  return segment;
}

ShmSegment ShmSegment::open(const std::string& name, int local_rank, int peer_rank) {
  const auto context = [&] {
    return core::str("rank ", local_rank, ": cannot open shm segment ", name, " of peer rank ",
                     peer_rank, ": ");
  };
  ShmSegment segment;
  segment.name_ = name;
  const int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  RINGLET_CHECK(fd >= 0, Error, context(), "shm_open: ", errno_text());
  struct stat info {};
  if (fstat(fd, &info) != 0 || info.st_size < static_cast<off_t>(kHeaderBytes)) {
    close(fd);
    RINGLET_THROW(HandshakeError, context(), "not a ringlet segment (too small)");
  }
  segment.mapped_bytes_ = static_cast<std::size_t>(info.st_size);
  void* base = mmap(nullptr, segment.mapped_bytes_, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_POPULATE, fd, 0);
  const std::string mmap_error = base == MAP_FAILED ? errno_text() : "";
  close(fd);
  RINGLET_CHECK(base != MAP_FAILED, Error, context(), "mmap: ", mmap_error);
  segment.base_ = base;

  auto* header = header_of(base);
  const std::uint64_t ring_bytes = header->ring_bytes;
  RINGLET_CHECK(
      header->magic.load(std::memory_order_acquire) == kMagic && header->version == kVersion,
      HandshakeError, context(), "bad magic or protocol version");
  RINGLET_CHECK(ring_bytes >= 4096 && (ring_bytes & (ring_bytes - 1)) == 0 &&
                    kHeaderBytes + 2 * ring_bytes == segment.mapped_bytes_,
                HandshakeError, context(), "inconsistent ring size ", ring_bytes);
  RINGLET_CHECK(header->ranks[0] == peer_rank && header->ranks[1] == local_rank, HandshakeError,
                context(), "it was made for ranks ", header->ranks[0], " and ", header->ranks[1]);
  segment.ring_bytes_ = static_cast<std::size_t>(ring_bytes);

  header->pid_namespaces[1] = pid_namespace();
  header->pids[1].store(getpid(), std::memory_order_relaxed);
  header->attached.store(1, std::memory_order_release);
  futex_wake_all(&header->attached);
  // Both sides have it mapped now; unlinking here as well as in the creator means a creator that
  // dies this instant still leaves nothing in /dev/shm. ENOENT (the creator was first) is fine.
  shm_unlink(name.c_str());
  return segment;
}

ShmSegment::ShmSegment(ShmSegment&& other) noexcept
    : name_(std::move(other.name_)),
      base_(std::exchange(other.base_, nullptr)),
      mapped_bytes_(other.mapped_bytes_),
      ring_bytes_(other.ring_bytes_),
      creator_(other.creator_),
      linked_(std::exchange(other.linked_, false)) {}

ShmSegment::~ShmSegment() {
  if (linked_) unlink_name();
  if (base_ != nullptr) munmap(base_, mapped_bytes_);
}

void ShmSegment::unlink_name() {
  shm_unlink(name_.c_str());
  linked_ = false;
}

void ShmSegment::wait_attached(int local_rank, int peer_rank, core::Deadline deadline) {
  auto* header = header_of(base_);
  while (header->attached.load(std::memory_order_acquire) == 0) {
    if (deadline.expired()) {
      unlink_name();
      RINGLET_THROW(TimeoutError, "rank ", local_rank, ": shm peer rank ", peer_rank,
                    " did not map segment ", name_, " before the deadline");
    }
    const auto slice = std::min<core::Deadline::Clock::duration>(deadline.remaining(),
                                                                 std::chrono::milliseconds(10));
    futex_wait(&header->attached, 0, std::chrono::duration_cast<std::chrono::microseconds>(slice));
  }
  unlink_name();
}

ShmRing ShmSegment::ring(int index) const {
  auto* base = static_cast<std::byte*>(base_);
  return ShmRing(reinterpret_cast<ShmRingControl*>(base + kControlOffset[index]),
                 base + kHeaderBytes + static_cast<std::size_t>(index) * ring_bytes_, ring_bytes_);
}

std::atomic<std::uint32_t>& ShmSegment::closed_flag(int side) const {
  return header_of(base_)->closed[side];
}

pid_t ShmSegment::pid(int side) const {
  const auto* header = header_of(base_);
  const pid_t pid = header->pids[side].load(std::memory_order_acquire);
  const std::uint64_t theirs = header->pid_namespaces[side], ours = pid_namespace();
  // Containers sharing /dev/shm may number processes differently: watching a foreign pid could
  // report a live peer as dead, so such a peer is only known by its closed flag and deadlines.
  return theirs != 0 && ours != 0 && theirs != ours ? 0 : pid;
}

}  // namespace ringlet::transport
