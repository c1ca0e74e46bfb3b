#include "transport/shared_objects.h"

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <system_error>

namespace ringlet::transport {

std::string shared_object_name(const char* kind, pid_t pid, const std::string& rest) {
  return "/" + std::string(kind) + std::to_string(pid) + "-" + rest;
}

pid_t creator_pid(const std::string& file, const char* kind) {
  const std::string prefix(kind);
  if (file.rfind(prefix, 0) != 0) return 0;
  const std::size_t begin = prefix.size();
  const std::size_t end = file.find_first_not_of("0123456789", begin);
  // 1-9 digits, then '-': a pid (pid_max is at most 2^22).
  if (end == begin || end == std::string::npos || end - begin > 9 || file[end] != '-') return 0;
  return static_cast<pid_t>(std::stol(file.substr(begin, end - begin)));
}

bool process_gone(pid_t pid) { return pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH; }

int sweep_shared_objects(const char* kind,
                         const std::function<bool(pid_t, const std::filesystem::path&)>& remove,
                         const std::filesystem::path& dir) {
  int removed = 0;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const pid_t pid = creator_pid(it->path().filename().string(), kind);
    std::error_code remove_error;
    if (pid > 0 && remove(pid, it->path()) && std::filesystem::remove(it->path(), remove_error)) {
      ++removed;
    }
  }
  return removed;
}

int remove_objects_of(const std::vector<pid_t>& exited) {
  std::vector<pid_t> gone;
  for (const pid_t pid : exited) {
    if (process_gone(pid)) gone.push_back(pid);  // alive again (reused), or unknown: left alone
  }
  if (gone.empty()) return 0;
  const auto theirs = [&](pid_t pid, const std::filesystem::path&) {
    return std::find(gone.begin(), gone.end(), pid) != gone.end();
  };
  int removed = 0;
  for (const char* kind : kSharedObjectKinds) removed += sweep_shared_objects(kind, theirs);
  return removed;
}

}  // namespace ringlet::transport
