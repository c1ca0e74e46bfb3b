// memfd_create + mmap for the owner; open("/proc/<pid>/fd/<fd>") + mmap for a peer.
#include "transport/shm/window.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <system_error>
#include <utility>

#include "core/error.h"

namespace ringlet::transport {

SharedWindow SharedWindow::create(std::size_t bytes) {
  RINGLET_CHECK(bytes > 0, ValueError, "shared window: size 0");
  SharedWindow window;
  window.fd_ = memfd_create("ringlet-window", MFD_CLOEXEC);
  RINGLET_CHECK(window.fd_ >= 0, Error, "shared window: memfd_create: ", core::errno_text());
  RINGLET_CHECK(ftruncate(window.fd_, static_cast<off_t>(bytes)) == 0, Error,
                "shared window: ftruncate to ", bytes, " bytes: ", core::errno_text());
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, window.fd_, 0);
  RINGLET_CHECK(base != MAP_FAILED, Error, "shared window: mmap of ", bytes,
                " bytes: ", core::errno_text());
  window.data_ = static_cast<std::byte*>(base);
  window.bytes_ = bytes;
  return window;
}

SharedWindow SharedWindow::open(const std::string& address) {
  long long pid = 0, bytes = 0;
  int fd = -1, used = 0;
  const bool parsed =
      std::sscanf(address.c_str(), "%lld/%d/%lld%n", &pid, &fd, &bytes, &used) == 3 &&
      static_cast<std::size_t>(used) == address.size() && pid > 0 && fd >= 0 && bytes > 0;
  RINGLET_CHECK(parsed, ValueError, "shared window: bad address '", address,
                "' (expected <pid>/<fd>/<bytes>)");
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  SharedWindow window;
  window.fd_ = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  RINGLET_CHECK(window.fd_ >= 0, Error, "shared window ", address, ": open ", path, ": ",
                core::errno_text());
  const off_t size = lseek(window.fd_, 0, SEEK_END);
  RINGLET_CHECK(size == bytes, Error, "shared window ", address, ": ", path, " holds ", size,
                " bytes, not ", bytes, " (not the window published)");
  void* base = mmap(nullptr, static_cast<std::size_t>(bytes), PROT_READ | PROT_WRITE, MAP_SHARED,
                    window.fd_, 0);
  RINGLET_CHECK(base != MAP_FAILED, Error, "shared window ", address,
                ": mmap: ", core::errno_text());
  window.data_ = static_cast<std::byte*>(base);
  window.bytes_ = static_cast<std::size_t>(bytes);
  window.close_handle();
  return window;
}

SharedWindow::SharedWindow(SharedWindow&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      fd_(std::exchange(other.fd_, -1)) {}

SharedWindow& SharedWindow::operator=(SharedWindow&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

SharedWindow::~SharedWindow() { release(); }

std::string SharedWindow::address() const {
  RINGLET_CHECK(fd_ >= 0, Error, "shared window: its handle is closed");
  return std::to_string(getpid()) + "/" + std::to_string(fd_) + "/" + std::to_string(bytes_);
}

void SharedWindow::close_handle() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void SharedWindow::release() {
  if (data_ != nullptr) munmap(data_, bytes_);
  close_handle();
  data_ = nullptr;
  bytes_ = 0;
}

}  // namespace ringlet::transport
