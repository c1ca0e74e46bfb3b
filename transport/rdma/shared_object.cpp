#include "transport/rdma/shared_object.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>
#include <utility>

#include "core/error.h"

namespace ringlet::transport::rdma {
namespace {

void* map(int fd, std::size_t bytes, const std::string& name) {
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const std::string error = data == MAP_FAILED ? core::errno_text() : "";
  close(fd);
  RINGLET_CHECK(data != MAP_FAILED, Error, "rdma (emulated): cannot map ", name, ": ", error);
  return data;
}

}  // namespace

SharedObject SharedObject::create(const std::string& name, std::size_t bytes) {
  RINGLET_CHECK(bytes > 0, ValueError, "rdma (emulated): shared object ", name, " of 0 bytes");
  const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  RINGLET_CHECK(fd >= 0, Error, "rdma (emulated): cannot create ", name, ": ", core::errno_text());
  // Reserve now: a sparse object on a full /dev/shm would SIGBUS at the first touch instead.
  const int err = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (err != 0) {
    close(fd);
    shm_unlink(name.c_str());
    RINGLET_THROW(Error, "rdma (emulated): reserving ", bytes, " bytes for ", name,
                  " in /dev/shm: ", core::errno_text(err));
  }
  SharedObject object;
  object.name_ = name;
  object.owner_ = true;
  object.bytes_ = bytes;
  try {
    object.data_ = map(fd, bytes, name);
  } catch (...) {
    shm_unlink(name.c_str());
    throw;
  }
  return object;
}

SharedObject SharedObject::open(const std::string& name) {
  const int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  RINGLET_CHECK(fd >= 0, Error, "rdma (emulated): cannot open ", name, ": ", core::errno_text());
  struct stat info {};
  if (fstat(fd, &info) != 0 || info.st_size <= 0) {
    close(fd);
    RINGLET_THROW(Error, "rdma (emulated): ", name, " is empty or unreadable");
  }
  SharedObject object;
  object.name_ = name;
  object.bytes_ = static_cast<std::size_t>(info.st_size);
  object.data_ = map(fd, object.bytes_, name);
  return object;
}

SharedObject::SharedObject(SharedObject&& other) noexcept
    : name_(std::move(other.name_)),
      data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      owner_(std::exchange(other.owner_, false)) {}

SharedObject& SharedObject::operator=(SharedObject&& other) noexcept {
  if (this != &other) {
    reset();
    name_ = std::move(other.name_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    owner_ = std::exchange(other.owner_, false);
  }
  return *this;
}

SharedObject::~SharedObject() { reset(); }

void SharedObject::reset() {
  if (owner_) shm_unlink(name_.c_str());
  if (data_ != nullptr) munmap(data_, bytes_);
  data_ = nullptr;
  owner_ = false;
}

}  // namespace ringlet::transport::rdma
