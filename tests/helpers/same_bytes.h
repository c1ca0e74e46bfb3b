// Whether two byte ranges are equal. Unlike a bare memcmp it takes an empty range from an
// empty vector (whose data() may be null: memcmp on a null pointer is undefined even for 0
// bytes).
#pragma once

#include <cstddef>
#include <cstring>

namespace ringlet::testing {

inline bool same_bytes(const void* a, const void* b, std::size_t bytes) {
  return bytes == 0 || std::memcmp(a, b, bytes) == 0;
}

}  // namespace ringlet::testing
