// What the fuzz targets share: the input as a file for readers that take a path (a memfd,
// opened again through /proc/self/fd/N, so no disk is touched), splitting one input into
// parts, and FUZZ_CHECK, an invariant whose failure is a finding (libFuzzer saves the input).
// A target catches only the project's errors (core::Error and what derives from it): any
// other exception escaping a parser is a finding too.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#define FUZZ_CHECK(cond)                                                                \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                     \
    }                                                                                   \
  } while (false)

namespace ringlet::fuzz {

// A file in memory whose content is replaced by write(); path() stays the same.
class MemoryFile {
 public:
  explicit MemoryFile(const char* name) : fd_(memfd_create(name, MFD_CLOEXEC)) {
    if (fd_ < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;
  ~MemoryFile() { close(fd_); }

  const std::string& write(std::string_view bytes) {
    bool ok = ftruncate(fd_, 0) == 0;
    for (std::size_t at = 0; ok && at < bytes.size();) {
      const ssize_t n = pwrite(fd_, bytes.data() + at, bytes.size() - at, static_cast<off_t>(at));
      ok = n > 0;
      at += ok ? static_cast<std::size_t>(n) : 0;
    }
    if (!ok) {
      std::perror("writing the memory file");
      std::abort();
    }
    return path_;
  }
  const std::string& path() const { return path_; }

 private:
  int fd_;
  std::string path_;
};

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Splits at every `separator`; at most `most` parts (the last keeps the rest).
inline std::vector<std::string_view> split(std::string_view text, char separator,
                                           std::size_t most) {
  std::vector<std::string_view> parts;
  while (parts.size() + 1 < most) {
    const auto at = text.find(separator);
    if (at == std::string_view::npos) break;
    parts.push_back(text.substr(0, at));
    text.remove_prefix(at + 1);
  }
  parts.push_back(text);
  return parts;
}

}  // namespace ringlet::fuzz
