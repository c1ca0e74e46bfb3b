// Opening a peer's shared-memory segment (transport/shm/segment.h): the bytes of /dev/shm/NAME
// come from the peer, which may be another program or another job. The input is the whole
// segment; a segment that opens has a consistent size, ring size and ranks.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "core/error.h"
#include "tests/fuzz/fuzz_support.h"
#include "transport/shm/segment.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string name = "/ringlet-fuzz-" + std::to_string(getpid());
  const int fd = shm_open(name.c_str(), O_CREAT | O_RDWR | O_TRUNC | O_CLOEXEC, 0600);
  FUZZ_CHECK(fd >= 0);
  FUZZ_CHECK(static_cast<std::size_t>(write(fd, data, size)) == size);
  close(fd);
  try {
    const auto segment = ringlet::transport::ShmSegment::open(name, 1, 0);
    const std::size_t ring = segment.ring_bytes();
    FUZZ_CHECK(ring >= 4096 && (ring & (ring - 1)) == 0 && 2 * ring < size);
  } catch (const ringlet::core::Error&) {
  }
  shm_unlink(name.c_str());
  return 0;
}
