// host_name: gethostname(2) with a bounded buffer.
#include "core/host.h"

#include <unistd.h>

namespace ringlet::core {

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "?";
  return name;
}

}  // namespace ringlet::core
