// copy_bytes: 64 bytes per iteration with unaligned 16-byte loads and stores (SSE2, every
// x86-64); the tail, and every other architecture, through memcpy. copy: memcpy, or copy_bytes at
// the gaps where memcpy's `rep movsb` crawls.
#include "core/copy.h"

#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace ringlet::core {

namespace {
// glibc copies with `rep movsb` from about 2 KiB (its `rep_movsb_threshold`, 2,112 bytes here).
constexpr std::size_t kRepMovsbBytes = 2048;
}  // namespace

void copy(void* dst, const void* src, std::size_t bytes) {
  if (bytes >= kRepMovsbBytes && copy_gap_is_slow(dst, src)) return copy_bytes(dst, src, bytes);
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
