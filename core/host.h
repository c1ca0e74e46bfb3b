// This machine's host name, as dumps, locks, event files and benchmark tables name it.
#pragma once

#include <string>

namespace ringlet::core {

// gethostname(2); "?" when the system cannot say.
std::string host_name();

}  // namespace ringlet::core
