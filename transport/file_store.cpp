// FileStore: an append-only record log under flock. Layout: the 12-byte header "RINGLETFS01\n",
// then records 'S' u32 key_len key u32 value_len value (set) or 'D' u32 key_len key (delete),
// lengths little-endian. Writers append whole records under the exclusive lock, so a reader
// holding the lock never sees a partial record; a partial or unknown one means corruption.
#include "transport/file_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <thread>

#include "core/error.h"
#include "core/log.h"

namespace ringlet::transport {
namespace {

constexpr char kHeader[] = "RINGLETFS01\n";
constexpr std::size_t kHeaderBytes = sizeof(kHeader) - 1;
// Counts destroyed FileStore objects for the last-one-deletes-the-file rule.
const std::string kClosedKey = "__ringlet_file_store/closed";

void put_u32(std::string& out, std::size_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

std::uint32_t get_u32(const char* in) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= std::uint32_t{static_cast<unsigned char>(in[i])} << (8 * i);
  return v;
}

std::string missing_list(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "'" : ", '") + k + "'";
  return out;
}

}  // namespace

// Holds flock on the store file for one operation; waits for it with a bounded poll.
class FileStore::Lock {
 public:
  Lock(FileStore& store, bool exclusive, const char* what) : fd_(store.fd_) {
    const auto deadline = core::Deadline::after(store.timeout_);
    auto pause = std::chrono::microseconds(50);
    while (::flock(fd_, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
      RINGLET_CHECK(errno == EWOULDBLOCK || errno == EINTR, Error, "file store ", store.path_,
                    ": flock failed in ", what, ": ", std::strerror(errno));
      RINGLET_CHECK(!deadline.expired(), TimeoutError, "file store ", store.path_, ": ", what,
                    " could not lock the file within ", store.timeout_.count(),
                    " ms (another process holds it)");
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(2000));
    }
  }
  ~Lock() { ::flock(fd_, LOCK_UN); }
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

 private:
  int fd_;
};

FileStore::FileStore(std::string path, int num_workers, std::chrono::milliseconds timeout)
    : path_(std::move(path)), num_workers_(num_workers), timeout_(timeout) {
  RINGLET_CHECK(!path_.empty(), ValueError, "file store: empty path");
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  RINGLET_CHECK(fd_ >= 0, Error, "file store ", path_, ": cannot open: ", std::strerror(errno));
  try {
    Lock lock(*this, true, "open");
    struct stat st {};
    RINGLET_CHECK(::fstat(fd_, &st) == 0, Error, "file store ", path_,
                  ": fstat failed: ", std::strerror(errno));
    if (st.st_size == 0) append(std::string(kHeader, kHeaderBytes));
    refresh();
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

FileStore::~FileStore() {
  if (num_workers_ > 0) {
    try {
      std::lock_guard guard(mutex_);
      Lock lock(*this, true, "close");
      refresh();
      if (add_locked(kClosedKey, 1) >= num_workers_) ::unlink(path_.c_str());
    } catch (const std::exception& e) {
      core::log(core::LogLevel::warn, "file store ", path_, ": cleanup failed: ", e.what());
    }
  }
  ::close(fd_);
}

void FileStore::refresh() {
  struct stat st {};
  RINGLET_CHECK(::fstat(fd_, &st) == 0, Error, "file store ", path_,
                ": fstat failed: ", std::strerror(errno));
  const auto size = static_cast<std::uint64_t>(st.st_size);
  RINGLET_CHECK(size >= offset_, Error, "file store ", path_, " shrank from ", offset_, " to ",
                size, " bytes (was it truncated or reused by another job?)");
  if (size == offset_) return;
  std::string bytes(size - offset_, '\0');
  std::size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n =
        ::pread(fd_, bytes.data() + got, bytes.size() - got, static_cast<off_t>(offset_ + got));
    if (n < 0 && errno == EINTR) continue;
    RINGLET_CHECK(n > 0, Error, "file store ", path_, ": read failed at byte ", offset_ + got, ": ",
                  n == 0 ? "unexpected end of file" : std::strerror(errno));
    got += static_cast<std::size_t>(n);
  }
  std::size_t at = 0;
  const auto corrupt = [&](const char* why) {
    RINGLET_THROW(Error, "file store ", path_, " is corrupt at byte ", offset_ + at, ": ", why,
                  " (not a ringlet file store, or a writer died mid-record)");
  };
  if (offset_ == 0) {
    if (bytes.compare(0, kHeaderBytes, kHeader) != 0) corrupt("bad header");
    at = kHeaderBytes;
  }
  // Reads one length-prefixed string at `at`.
  const auto field = [&](std::string& out) {
    if (bytes.size() - at < 4) corrupt("truncated length");
    const std::size_t len = get_u32(bytes.data() + at);
    at += 4;
    if (bytes.size() - at < len) corrupt("truncated record");
    out.assign(bytes, at, len);
    at += len;
  };
  std::string key, value;
  while (at < bytes.size()) {
    const char type = bytes[at++];
    if (type == 'S') {
      field(key);
      field(value);
      data_[key] = std::move(value);
    } else if (type == 'D') {
      field(key);
      data_.erase(key);
    } else {
      --at;
      corrupt("unknown record type");
    }
  }
  offset_ = size;
}

void FileStore::append(const std::string& record) {
  std::size_t done = 0;
  while (done < record.size()) {
    const ssize_t n = ::write(fd_, record.data() + done, record.size() - done);
    if (n < 0 && errno == EINTR) continue;
    RINGLET_CHECK(n > 0, Error, "file store ", path_, ": write failed: ", std::strerror(errno));
    done += static_cast<std::size_t>(n);
  }
}

void FileStore::append_set(const std::string& key, const std::string& value) {
  std::string record = "S";
  put_u32(record, key.size());
  record += key;
  put_u32(record, value.size());
  record += value;
  append(record);
  refresh();  // picks up our own record (and advances offset_ past it)
}

void FileStore::append_delete(const std::string& key) {
  std::string record = "D";
  put_u32(record, key.size());
  record += key;
  append(record);
  refresh();
}

std::int64_t FileStore::add_locked(const std::string& key, std::int64_t delta) {
  std::int64_t current = 0;
  const auto it = data_.find(key);
  if (it != data_.end()) {
    const auto& v = it->second;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), current);
    RINGLET_CHECK(ec == std::errc() && end == v.data() + v.size() && !v.empty(), Error,
                  "file store ", path_, ": add('", key, "'): the value is not an integer: '",
                  v.substr(0, 64), "'");
  }
  std::int64_t result = 0;
  RINGLET_CHECK(!__builtin_add_overflow(current, delta, &result), Error, "file store ", path_,
                ": add('", key, "', ", delta, ") overflows");
  append_set(key, std::to_string(result));
  return result;
}

void FileStore::set(const std::string& key, const std::string& value) {
  std::lock_guard guard(mutex_);
  Lock lock(*this, true, "set");
  refresh();
  append_set(key, value);
}

std::int64_t FileStore::add(const std::string& key, std::int64_t delta) {
  std::lock_guard guard(mutex_);
  Lock lock(*this, true, "add");
  refresh();
  return add_locked(key, delta);
}

std::string FileStore::compare_set(const std::string& key, const std::string& expected,
                                   const std::string& desired) {
  std::lock_guard guard(mutex_);
  Lock lock(*this, true, "compare_set");
  refresh();
  const auto it = data_.find(key);
  const bool match = it == data_.end() ? expected.empty() : it->second == expected;
  if (!match) return it == data_.end() ? std::string() : it->second;
  append_set(key, desired);
  return desired;
}

bool FileStore::delete_key(const std::string& key) {
  std::lock_guard guard(mutex_);
  Lock lock(*this, true, "delete_key");
  refresh();
  if (!data_.count(key)) return false;
  append_delete(key);
  return true;
}

std::int64_t FileStore::num_keys() {
  std::lock_guard guard(mutex_);
  Lock lock(*this, false, "num_keys");
  refresh();
  return static_cast<std::int64_t>(data_.size() - data_.count(kClosedKey));
}

void FileStore::set_timeout(std::chrono::milliseconds timeout) {
  std::lock_guard guard(mutex_);
  timeout_ = timeout;
}

std::vector<std::string> FileStore::poll(const std::vector<std::string>& keys, std::string* value) {
  std::lock_guard guard(mutex_);
  Lock lock(*this, false, "wait");
  refresh();
  std::vector<std::string> missing;
  for (const auto& k : keys) {
    if (!data_.count(k)) missing.push_back(k);
  }
  if (missing.empty() && value != nullptr) *value = data_[keys[0]];
  return missing;
}

void FileStore::wait(const std::vector<std::string>& keys, core::Deadline deadline) {
  RINGLET_CHECK(!keys.empty(), ValueError, "file store ", path_, ": wait() with no keys");
  // Poll, backing off from 1 ms to 20 ms: cheap for waits that end soon, light for long ones.
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    const auto missing = poll(keys, nullptr);
    if (missing.empty()) return;
    RINGLET_CHECK(!deadline.expired(), TimeoutError, "file store ", path_,
                  ": wait timed out; missing key(s): ", missing_list(missing));
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(pause, deadline.remaining()));
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
}

std::string FileStore::get(const std::string& key, core::Deadline deadline) {
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    std::string value;
    if (poll({key}, &value).empty()) return value;
    RINGLET_CHECK(!deadline.expired(), TimeoutError, "file store ", path_, ": get('", key,
                  "') timed out; missing key(s): '", key, "'");
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(pause, deadline.remaining()));
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
}

}  // namespace ringlet::transport
