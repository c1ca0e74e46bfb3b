// The futex system calls behind futex.h.
#include "transport/shm/futex.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <ctime>

namespace ringlet::transport {
namespace {

std::uint32_t* futex_address(std::atomic<std::uint32_t>* word) {
  // std::atomic<uint32_t> is a lock-free 4-byte object holding the value (see the static_assert
  // in ring.h), which is what the kernel's futex word is.
  return reinterpret_cast<std::uint32_t*>(word);
}

}  // namespace

void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected,
                std::chrono::microseconds timeout) {
  const auto us = std::max<std::int64_t>(timeout.count(), 1);
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(us / 1000000);
  ts.tv_nsec = static_cast<long>((us % 1000000) * 1000);
  // Not FUTEX_PRIVATE: the word is in a mapping shared between processes. EAGAIN (value
  // changed), EINTR and ETIMEDOUT all just return; callers re-check their condition.
  syscall(SYS_futex, futex_address(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futex_wake_all(std::atomic<std::uint32_t>* word) {
  syscall(SYS_futex, futex_address(word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

}  // namespace ringlet::transport
