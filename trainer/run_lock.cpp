// flock(2) on run_dir/lock; see run_lock.h.
#include "trainer/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <iomanip>
#include <sstream>

#include "core/host.h"

namespace ringlet::trainer {
namespace {

// What the lock file says, without its trailing newline.
std::string read_holder(int fd) {
  std::string text;
  char buffer[512];
  for (off_t offset = 0;;) {
    const ssize_t n = ::pread(fd, buffer, sizeof buffer, offset);
    if (n <= 0 || text.size() > 4096) break;
    text.append(buffer, static_cast<std::size_t>(n));
    offset += n;
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

void write_holder(const std::filesystem::path& path, int fd, const std::string& holder) {
  const std::string line = holder + "\n";
  RINGLET_CHECK(
      ::ftruncate(fd, 0) == 0 &&
          ::pwrite(fd, line.data(), line.size(), 0) == static_cast<ssize_t>(line.size()) &&
          ::fsync(fd) == 0,
      Error, "cannot write ", path.string(), ": ", std::strerror(errno));
}

}  // namespace

std::string local_time_now(const char* format) {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  std::ostringstream text;
  text << std::put_time(&local, format);
  return text.str();
}

std::string this_process_as_holder() {
  return core::str("pid ", ::getpid(), " on host ", core::host_name(), " since ",
                   local_time_now("%Y-%m-%d %H:%M:%S"));
}

RunLock::RunLock(const std::filesystem::path& dir) : path_(dir / "lock") {
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  RINGLET_CHECK(fd_ >= 0, Error, "cannot open the run directory's lock ", path_.string(), ": ",
                std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int saved = errno;
    const std::string holder = read_holder(fd_);
    ::close(fd_);
    fd_ = -1;
    RINGLET_CHECK(saved == EWOULDBLOCK, Error, "cannot lock ", path_.string(), ": ",
                  std::strerror(saved));
    throw RunLockedError(
        core::str("run directory ", dir.string(), " is in use by another job (",
                  holder.empty() ? std::string("its holder has not written its name yet") : holder,
                  "; ", path_.string(), "): wait for it to end, or pick another --out"));
  }
  stale_ = read_holder(fd_);
  try {
    write_holder(path_, fd_, this_process_as_holder());
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

RunLock::~RunLock() {
  if (fd_ < 0) return;
  if (::ftruncate(fd_, 0) == 0) ::fsync(fd_);
  ::close(fd_);  // releases the flock
}

}  // namespace ringlet::trainer
