// DeviceControl: the shared blocks (a seqlock-guarded fingerprint ring, the failure reason) and
// the peers' pids.
#include "collectives/device_control.h"

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>

#include "core/error.h"
#include "core/log.h"

namespace ringlet::collectives {
namespace {

constexpr std::size_t kRing = 4096;
constexpr std::size_t kReasonBytes = 1024;

// A fingerprint as three words, each read and written atomically (a torn record is caught by
// the version check, never read as a data race).
constexpr std::size_t kWords = sizeof(Fingerprint) / sizeof(std::uint64_t);
static_assert(sizeof(Fingerprint) % sizeof(std::uint64_t) == 0);

int open_pidfd(long pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0));
#else
  return -1;
#endif
}

}  // namespace

// One rank's block. Zero-filled when created: no record, not failed.
struct DeviceControl::Block {
  struct Record {
    std::uint64_t version;  // 2 seq + 1 while written, 2 seq + 2 once complete
    std::uint64_t words[kWords];
  };
  std::uint32_t failed;
  std::uint32_t left;  // set as the rank closes its control: its exit is no failure
  char reason[kReasonBytes];
  Record ring[kRing];
};

DeviceControl::DeviceControl(int rank, int size) : rank_(rank), size_(size) {}

DeviceControl::~DeviceControl() {
  if (!blocks_.mapped.empty()) {
    std::atomic_ref(block(rank_).left).store(1, std::memory_order_release);
  }
  for (int fd : pidfds_) {
    if (fd >= 0) ::close(fd);
  }
}

std::unique_ptr<DeviceControl> DeviceControl::connect(transport::Store& store,
                                                      const std::string& key, int rank, int size,
                                                      core::Deadline deadline) {
  std::unique_ptr<DeviceControl> control(new DeviceControl(rank, size));
  store.set(key + "pid/" + std::to_string(rank), std::to_string(::getpid()));
  control->pids_.assign(static_cast<std::size_t>(size), 0);
  control->pidfds_.assign(static_cast<std::size_t>(size), -1);
  for (int p = 0; p < size; ++p) {
    control->pids_[p] = std::stol(store.get(key + "pid/" + std::to_string(p), deadline));
    if (control->pids_[p] != ::getpid()) control->pidfds_[p] = open_pidfd(control->pids_[p]);
  }
  control->blocks_ =
      setup_shared_windows(store, key + "block/", rank, size, sizeof(Block), deadline);
  if (control->blocks_.mapped.empty()) return nullptr;
  return control;
}

bool DeviceControl::one_process() const {
  for (long pid : pids_) {
    if (pid != ::getpid()) return false;
  }
  return true;
}

bool DeviceControl::shares_a_process() const {
  for (int r = 0; r < size_; ++r) {
    if (r != rank_ && pids_[static_cast<std::size_t>(r)] == ::getpid()) return true;
  }
  return false;
}

DeviceControl::Block& DeviceControl::block(int rank) const {
  return *reinterpret_cast<Block*>(blocks_.mapped[rank]);
}

void DeviceControl::publish(const Fingerprint& fp) {
  Block::Record& record = block(rank_).ring[fp.seq % kRing];
  std::atomic_ref version(record.version);
  version.store(2 * fp.seq + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  std::uint64_t words[kWords];
  std::memcpy(words, &fp, sizeof fp);
  for (std::size_t i = 0; i < kWords; ++i) {
    std::atomic_ref(record.words[i]).store(words[i], std::memory_order_relaxed);
  }
  version.store(2 * fp.seq + 2, std::memory_order_release);
}

std::optional<std::pair<int, Fingerprint>> DeviceControl::mismatch(const Fingerprint& fp) const {
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    Block::Record& record = block(p).ring[fp.seq % kRing];
    std::atomic_ref version(record.version);
    const std::uint64_t before = version.load(std::memory_order_acquire);
    if (before != 2 * fp.seq + 2) continue;  // not issued there yet (or long ago)
    std::uint64_t words[kWords];
    for (std::size_t i = 0; i < kWords; ++i) {
      words[i] = std::atomic_ref(record.words[i]).load(std::memory_order_relaxed);
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (version.load(std::memory_order_relaxed) != before) continue;  // rewritten meanwhile
    Fingerprint theirs;
    std::memcpy(&theirs, words, sizeof theirs);
    if (!(theirs == fp)) return std::make_pair(p, theirs);
  }
  return std::nullopt;
}

std::vector<int> DeviceControl::not_issued(std::uint64_t seq) const {
  std::vector<int> late;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    const std::uint64_t version =
        std::atomic_ref(block(p).ring[seq % kRing].version).load(std::memory_order_acquire);
    if (version < 2 * seq + 2) late.push_back(p);
  }
  return late;
}

void DeviceControl::set_failed(const std::string& reason) {
  Block& mine = block(rank_);
  std::atomic_ref failed(mine.failed);
  if (failed.load(std::memory_order_acquire) != 0) return;
  const std::size_t n = std::min(reason.size(), kReasonBytes - 1);
  std::memcpy(mine.reason, reason.data(), n);
  mine.reason[n] = '\0';
  failed.store(1, std::memory_order_release);
}

bool DeviceControl::exited(int peer) const {
  if (pids_[peer] == ::getpid()) return false;
  if (pidfds_[peer] >= 0) {
    pollfd watch{pidfds_[peer], POLLIN, 0};
    return ::poll(&watch, 1, 0) > 0;  // a pidfd is readable once its process has exited
  }
  std::ifstream stat("/proc/" + std::to_string(pids_[peer]) + "/stat");
  if (!stat) return true;
  std::string line;
  std::getline(stat, line);
  const auto close = line.rfind(')');  // the state follows the command name in parentheses
  return close != std::string::npos && close + 2 < line.size() &&
         (line[close + 2] == 'Z' || line[close + 2] == 'X');
}

// One poll over the pidfds of the peers that have not left (a peer without one is looked up in
// /proc); the first whose process has exited.
int DeviceControl::first_exited() const {
  std::vector<pollfd> watch;
  std::vector<int> whose;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_ || std::atomic_ref(block(p).left).load(std::memory_order_acquire) != 0) continue;
    if (pidfds_[p] < 0) {
      if (exited(p)) return p;
      continue;
    }
    watch.push_back({pidfds_[p], POLLIN, 0});
    whose.push_back(p);
  }
  if (watch.empty() || ::poll(watch.data(), watch.size(), 0) <= 0) return -1;
  for (std::size_t i = 0; i < watch.size(); ++i) {
    if (watch[i].revents != 0) return whose[i];
  }
  return -1;
}

std::string DeviceControl::peer_trouble() const {
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    Block& theirs = block(p);
    if (std::atomic_ref(theirs.failed).load(std::memory_order_acquire) != 0) {
      return core::str("rank ", p, " failed: ",
                       std::string(theirs.reason, strnlen(theirs.reason, kReasonBytes)));
    }
  }
  const int gone = first_exited();
  if (gone < 0) return "";
  return core::str("rank ", gone, " (pid ", pids_[gone],
                   ") exited without closing its communicator");
}

}  // namespace ringlet::collectives
