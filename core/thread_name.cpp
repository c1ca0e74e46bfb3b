// core::name_this_thread over pthread_setname_np (Linux: 16 bytes with the terminator).
#include "core/thread_name.h"

#include <pthread.h>

namespace ringlet::core {

namespace {
constexpr std::size_t kNameChars = 15;
}  // namespace

void name_this_thread(const std::string& name) {
  ::pthread_setname_np(::pthread_self(), name.substr(0, kNameChars).c_str());
}

std::string this_thread_name() {
  char name[kNameChars + 1] = {};
  if (::pthread_getname_np(::pthread_self(), name, sizeof name) != 0) return "";
  return name;
}

}  // namespace ringlet::core
