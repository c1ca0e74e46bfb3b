// Whether this test program is built under a sanitizer, and how much longer its waits allow then.
#pragma once

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RINGLET_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define RINGLET_TEST_SANITIZED 1
#endif
#endif

namespace ringlet::testing {

// A sanitizer's instrumentation makes the binary's end-to-end runs several times slower (3x under
// ASan on 2 cores); a test's wall-clock limits are multiplied by this, as meson's timeouts are by
// scripts/sanitize.sh's --timeout-multiplier 3.
#ifdef RINGLET_TEST_SANITIZED
constexpr int kSanitizerSlowdown = 3;
#else
constexpr int kSanitizerSlowdown = 1;
#endif

}  // namespace ringlet::testing
