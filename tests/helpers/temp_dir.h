// A fresh, uniquely named directory under the system temp dir for one test, removed (with its
// contents) when the object goes away; or a path of this process's own (process_temp_path).
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <string>

namespace ringlet::testing {

struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& prefix = "ringlet_test") {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "_XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp " + pattern);
    path = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

// A path under the system temp dir that is this process's alone (prefix_<pid>), not created:
// for a test that makes and removes the directory itself. Two suites running at once on one
// machine never share it.
inline std::filesystem::path process_temp_path(const std::string& prefix) {
  return std::filesystem::temp_directory_path() / (prefix + "_" + std::to_string(::getpid()));
}

}  // namespace ringlet::testing
