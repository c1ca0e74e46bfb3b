// Atomic replacement and whole-line appends; see file_io.h.
#include "core/file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace ringlet::core {
namespace fs = std::filesystem;
namespace {

// Closes on scope exit.
struct FileDescriptor {
  int fd = -1;
  ~FileDescriptor() {
    if (fd >= 0) ::close(fd);
  }
};

void write_all(const fs::path& path, int fd, const std::string& bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    RINGLET_CHECK(n > 0, Error, "cannot write ", path.string(), ": ", std::strerror(errno));
    done += static_cast<std::size_t>(n);
  }
}

void sync(const fs::path& path, int fd) {
  RINGLET_CHECK(::fsync(fd) == 0, Error, "fsync of ", path.string(),
                " failed: ", std::strerror(errno));
}

// Whether `name` is DIR/.NAME.tmp.PID.N as temporary_path makes it.
bool is_temporary_name(const std::string& name) {
  const auto tag = name.rfind(".tmp.");
  if (name.empty() || name[0] != '.' || tag == std::string::npos || tag < 2) return false;
  const std::string rest = name.substr(tag + 5);  // PID.N
  const auto dot = rest.find('.');
  const auto digits = [](const std::string& s) {
    return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
  };
  return dot != std::string::npos && digits(rest.substr(0, dot)) && digits(rest.substr(dot + 1));
}

}  // namespace

// A name in the same directory (rename is atomic only within one file system) that no other
// writer, thread or process, uses at the same time.
fs::path temporary_path(const fs::path& path) {
  static std::atomic<unsigned> counter{0};
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  return dir / ("." + path.filename().string() + ".tmp." + std::to_string(::getpid()) + "." +
                std::to_string(counter.fetch_add(1)));
}

std::vector<std::string> remove_temporaries(const fs::path& dir) {
  std::vector<std::string> removed;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (is_temporary_name(name) && entry.is_regular_file(ec) && fs::remove(entry.path(), ec)) {
      removed.push_back(name);
    }
  }
  return removed;
}

void write_file_atomically(const fs::path& path, const std::string& bytes) {
  const fs::path tmp = temporary_path(path);
  {
    FileDescriptor file{::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)};
    RINGLET_CHECK(file.fd >= 0, Error, "cannot create ", tmp.string(), ": ", std::strerror(errno));
    try {
      write_all(tmp, file.fd, bytes);
      sync(tmp, file.fd);
      RINGLET_CHECK(::rename(tmp.c_str(), path.c_str()) == 0, Error, "cannot rename ", tmp.string(),
                    " to ", path.string(), ": ", std::strerror(errno));
    } catch (...) {
      ::unlink(tmp.c_str());
      throw;
    }
  }
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  FileDescriptor d{::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  RINGLET_CHECK(d.fd >= 0, Error, "cannot open directory ", dir.string(), ": ",
                std::strerror(errno));
  sync(dir, d.fd);  // the rename itself survives a crash
}

void append_line(const fs::path& path, const std::string& line) {
  RINGLET_CHECK(line.find('\n') == std::string::npos, ValueError, "append_line to ", path.string(),
                ": the line holds a newline");
  FileDescriptor file{::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)};
  RINGLET_CHECK(file.fd >= 0, Error, "cannot open ", path.string(),
                " for appending: ", std::strerror(errno));
  const std::string whole = line + "\n";
  const ssize_t n = ::write(file.fd, whole.data(), whole.size());
  RINGLET_CHECK(n == static_cast<ssize_t>(whole.size()), Error, "cannot append to ", path.string(),
                ": ", n < 0 ? std::strerror(errno) : "short write");
  sync(path, file.fd);
}

std::string read_file_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in.is_open()) return "";
  std::ostringstream text;
  text << in.rdbuf();
  RINGLET_CHECK(!in.bad(), Error, "cannot read ", path.string());
  return text.str();
}

}  // namespace ringlet::core
