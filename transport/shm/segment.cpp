// ShmSegment: creating, opening and attaching the pair's mapping; its header layout.
#include "transport/shm/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <system_error>
#include <utility>

#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "core/random.h"
#include "transport/shared_objects.h"
#include "transport/shm/futex.h"
#include "transport/shm/process_watch.h"

namespace ringlet::transport {
namespace {

constexpr std::uint64_t kMagic = 0x31746d68732d7772ULL;  // "rw-shmt1", stored last by the creator
constexpr std::uint32_t kVersion = 2;
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
  // The line the two sides bounce once when they connect (line_round_trip_ns), on its own.
  alignas(64) std::atomic<std::uint64_t> round_trip_line;
};
static_assert(sizeof(SegmentHeader) <= kControlOffset[0]);
static_assert(sizeof(ShmRingControl) <= kControlOffset[1] - kControlOffset[0]);
static_assert(kControlOffset[1] + sizeof(ShmRingControl) <= kHeaderBytes);

SegmentHeader* header_of(void* base) { return static_cast<SegmentHeader*>(base); }

}  // namespace

std::size_t ShmSegment::configured_ring_bytes() {
  const auto bytes = core::env_int("RINGLET_SHM_RING_BYTES", 4 << 20, 4096, std::int64_t{1} << 30);
  RINGLET_CHECK((bytes & (bytes - 1)) == 0, ValueError, "environment variable ",
                "RINGLET_SHM_RING_BYTES=", bytes, " is not a power of two");
  return static_cast<std::size_t>(bytes);
}

std::size_t ShmSegment::configured_segment_bytes() {
  return kHeaderBytes + 2 * configured_ring_bytes();
}

namespace {

// The identity of this process's pid namespace (0 if unknown).
std::uint64_t pid_namespace() {
  struct stat info {};
  return stat("/proc/self/ns/pid", &info) == 0 ? static_cast<std::uint64_t>(info.st_ino) : 0;
}

std::string random_nonce() {
  const std::uint64_t value = core::random_u64();
  static constexpr char kHex[] = "0123456789abcdef";
  std::string text(16, '0');
  for (int i = 0; i < 16; ++i) text[i] = kHex[(value >> (60 - 4 * i)) & 0xf];
  return text;
}

// Whether the segment file at `path` was made by a dead process of this pid namespace and
// never attached: its header, read through a private read-only mapping, says so.
bool is_stale(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat info {};
  void* base = MAP_FAILED;
  if (fstat(fd, &info) == 0 && info.st_size >= static_cast<off_t>(kHeaderBytes)) {
    base = mmap(nullptr, kHeaderBytes, PROT_READ, MAP_SHARED, fd, 0);
  }
  close(fd);
  if (base == MAP_FAILED) return false;
  const auto* header = header_of(base);
  const pid_t pid = header->pids[0].load(std::memory_order_acquire);
  const bool stale = header->magic.load(std::memory_order_acquire) == kMagic &&
                     header->version == kVersion && header->pid_namespaces[0] != 0 &&
                     header->pid_namespaces[0] == pid_namespace() &&
                     header->attached.load(std::memory_order_acquire) == 0 && pid > 0 &&
                     ::kill(pid, 0) != 0 && errno == ESRCH;
  munmap(base, kHeaderBytes);
  return stale;
}

}  // namespace

int ShmSegment::remove_stale(const std::string& dir) {
  return sweep_shared_objects(
      kShmSegmentKind,
      [](pid_t, const std::filesystem::path& path) {
        if (!is_stale(path)) return false;
        core::log(core::LogLevel::info, "shm: removing ", path.filename().string(),
                  ", left by a job that died before its peer attached");
        return true;
      },
      dir);
}

ShmSegment ShmSegment::create(int local_rank, int peer_rank) {
  static std::once_flag swept;
  std::call_once(swept, [] { remove_stale(); });
  ShmSegment segment;
  segment.creator_ = true;
  segment.ring_bytes_ = configured_ring_bytes();
  segment.mapped_bytes_ = kHeaderBytes + 2 * segment.ring_bytes_;
  // The pid lets a test (or an operator) tell whose segment a leftover is; the nonce makes the
  // name unguessable and unique across jobs and reconnects.
  segment.name_ = shared_object_name(kShmSegmentKind, getpid(),
                                     core::str(random_nonce(), "-", local_rank, "-", peer_rank));
  const auto context = [&] {
    return core::str("rank ", local_rank, ": cannot create shm segment ", segment.name_,
                     " for peer rank ", peer_rank, ": ");
  };
  const int fd = shm_open(segment.name_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  RINGLET_CHECK(fd >= 0, Error, context(), "shm_open: ", core::errno_text());
  segment.linked_ = true;  // from here on, a failure unlinks the name again (destructor)
  // Reserve the memory now: a sparse file on a full tmpfs would SIGBUS on first touch.
  const int err = posix_fallocate(fd, 0, static_cast<off_t>(segment.mapped_bytes_));
  if (err != 0) {
    close(fd);
    RINGLET_THROW(
        Error, context(), "reserving ", segment.mapped_bytes_,
        " bytes in /dev/shm: ", core::errno_text(err),
        " (free space in /dev/shm, lower RINGLET_SHM_RING_BYTES, or RINGLET_TRANSPORT=tcp)");
  }
  void* base = mmap(nullptr, segment.mapped_bytes_, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_POPULATE, fd, 0);
  const std::string mmap_error = base == MAP_FAILED ? core::errno_text() : "";
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
  RINGLET_CHECK(fd >= 0, Error, context(), "shm_open: ", core::errno_text());
  struct stat info {};
  if (fstat(fd, &info) != 0 || info.st_size < static_cast<off_t>(kHeaderBytes)) {
    close(fd);
    RINGLET_THROW(HandshakeError, context(), "not a ringlet segment (too small)");
  }
  segment.mapped_bytes_ = static_cast<std::size_t>(info.st_size);
  void* base = mmap(nullptr, segment.mapped_bytes_, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_POPULATE, fd, 0);
  const std::string mmap_error = base == MAP_FAILED ? core::errno_text() : "";
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

std::string process_token() { return core::str(getpid(), "/", pid_namespace()); }

namespace {

// The process of a token from process_token(), when it is in this pid namespace.
pid_t process_of(const std::string& token) {
  const auto slash = token.find('/');
  if (slash == std::string::npos) return 0;
  try {
    if (std::stoull(token.substr(slash + 1)) != pid_namespace()) return 0;
    return static_cast<pid_t>(std::stol(token.substr(0, slash)));
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace

void ShmSegment::wait_attached(int local_rank, int peer_rank, core::Deadline deadline,
                               const std::string& peer) {
  auto* header = header_of(base_);
  const ProcessWatch watch(process_of(peer));
  while (header->attached.load(std::memory_order_acquire) == 0) {
    if (watch.pid() > 0 && watch.exited()) {
      unlink_name();
      RINGLET_THROW(PeerError, "rank ", local_rank, ": shm peer rank ", peer_rank, " (pid ",
                    watch.pid(), ") exited before it mapped segment ", name_);
    }
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

std::atomic<std::uint64_t>& ShmSegment::round_trip_line() const {
  return header_of(base_)->round_trip_line;
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
