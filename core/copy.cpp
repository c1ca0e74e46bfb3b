// copy_bytes: 64 bytes per iteration with unaligned 16-byte loads and stores (SSE2, every
// x86-64); the tail, and every other architecture, through memcpy. copy: memcpy, or copy_bytes at
// the gaps where memcpy's `rep movsb` crawls, where it does on this CPU.
#include "core/copy.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/page_buffer.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace ringlet::core {

namespace {
// glibc copies with `rep movsb` from about 2 KiB (its `rep_movsb_threshold`, 2,112 bytes here).
constexpr std::size_t kRepMovsbBytes = 2048;

// The probe's copy: within any core's own cache, long enough for `rep movsb`, short enough that
// a crawl at 2 GB/s costs 8 us a copy.
constexpr std::size_t kProbeBytes = 16 << 10;
constexpr int kProbeReps = 5;

// The fastest of kProbeReps copies of kProbeBytes (the first one warms the cache), in seconds.
template <typename Copy>
double fastest_copy(char* dst, const char* src, Copy copy) {
  double best = 1e9;
  for (int i = 0; i < kProbeReps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    copy(dst, src, kProbeBytes);
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    best = std::min(best, took.count());
  }
  return best;
}

bool probe_memcpy_crawls() {
  const PageBuffer src(kProbeBytes, 1), dst(kProbeBytes + 64, 0);
  char* to = dst.data() + 8;  // 8 bytes past the source modulo a page
  const double memcpy_s = fastest_copy(
      to, src.data(), [](void* d, const void* s, std::size_t n) { std::memcpy(d, s, n); });
  const double loop_s = fastest_copy(to, src.data(), copy_bytes);
  return memcpy_s > 2 * loop_s;
}
}  // namespace

bool memcpy_crawls_at_a_gap() {
  static const bool crawls = probe_memcpy_crawls();
  return crawls;
}

void copy(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;  // an empty buffer's pointer may be null, which memcpy may not take
  if (bytes >= kRepMovsbBytes && copy_gap_is_slow(dst, src) && memcpy_crawls_at_a_gap()) {
    return copy_bytes(dst, src, bytes);
  }
  std::memcpy(dst, src, bytes);
}

void copy_bytes(void* dst, const void* src, std::size_t bytes) {
  auto* out = static_cast<char*>(dst);
  const auto* in = static_cast<const char*>(src);
#if defined(__SSE2__)
  for (; bytes >= 64; out += 64, in += 64, bytes -= 64) {
    const auto* from = reinterpret_cast<const __m128i*>(in);
    auto* to = reinterpret_cast<__m128i*>(out);
    const __m128i a = _mm_loadu_si128(from), b = _mm_loadu_si128(from + 1);
    const __m128i c = _mm_loadu_si128(from + 2), d = _mm_loadu_si128(from + 3);
    _mm_storeu_si128(to, a);
    _mm_storeu_si128(to + 1, b);
    _mm_storeu_si128(to + 2, c);
    _mm_storeu_si128(to + 3, d);
  }
#endif
  if (bytes > 0) std::memcpy(out, in, bytes);
}

}  // namespace ringlet::core
