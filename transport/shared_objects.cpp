#include "transport/stale_objects.h"

#include <signal.h>
#include <sys/mman.h>

#include <cerrno>
#include <filesystem>
#include <string>

namespace ringlet::transport {

int remove_objects_of(const std::vector<pid_t>& exited) {
  std::vector<std::string> prefixes;
  for (const pid_t pid : exited) {
    if (pid <= 0 || ::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive (reused), or unknown
    for (const char* kind : {"ringlet-shm-", "ringlet-ibemu-"})
      prefixes.push_back(kind + std::to_string(pid) + "-");
  }
  int removed = 0;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/dev/shm", ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    for (const std::string& prefix : prefixes) {
      if (name.rfind(prefix, 0) == 0 && ::shm_unlink(("/" + name).c_str()) == 0) ++removed;
    }
  }
  return removed;
}

}  // namespace ringlet::transport
