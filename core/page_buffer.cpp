// PageBuffer: aligned_alloc at a page, rounded up to whole pages, filled.
#include "core/page_buffer.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace ringlet::core {

PageBuffer::PageBuffer(std::size_t bytes, char fill) : bytes_(bytes) {
  const std::size_t rounded =
      (std::max<std::size_t>(bytes, 1) + kPageBytes - 1) / kPageBytes * kPageBytes;
  memory_.reset(static_cast<char*>(std::aligned_alloc(kPageBytes, rounded)));
  RINGLET_CHECK(memory_ != nullptr, Error, "out of memory for ", rounded, " bytes");
  std::memset(memory_.get(), fill, rounded);
}

}  // namespace ringlet::core
