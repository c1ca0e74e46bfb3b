// The first bytes a TCP listener reads from a stranger (transport/tcp/handshake.h): a 32-byte
// Hello, then 40-byte frame headers checked against the posted receive buffer. Input: Hello,
// FrameHeader, the buffer's capacity (u64), the local rank and world size (a byte each).
#include <cstdint>
#include <cstring>

#include "tests/fuzz/fuzz_support.h"
#include "transport/tcp/handshake.h"

using namespace ringlet::transport::tcp;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  constexpr std::size_t kNeed = sizeof(Hello) + sizeof(FrameHeader) + 8 + 2;
  if (size < kNeed) return 0;
  Hello hello;
  FrameHeader frame;
  std::uint64_t capacity = 0;
  std::memcpy(&hello, data, sizeof hello);
  std::memcpy(&frame, data + sizeof hello, sizeof frame);
  std::memcpy(&capacity, data + sizeof hello + sizeof frame, 8);
  const int world = 1 + data[kNeed - 1];
  const int local = data[kNeed - 2] % world;
  constexpr std::uint64_t kToken = 0x5eed5eed5eed5eedULL;

  const AckStatus status = check_hello(hello, kToken, local, world);
  FUZZ_CHECK(!describe(status).empty());
  if (status == AckStatus::ok) {
    FUZZ_CHECK(hello.version == kProtocolVersion && hello.job_token == kToken);
    FUZZ_CHECK(hello.rank < static_cast<std::uint32_t>(world));
    FUZZ_CHECK(hello.peer_rank == static_cast<std::uint32_t>(local));
    FUZZ_CHECK(hello.socket_index < hello.socket_count);
  }
  if (check_frame(frame, capacity).empty()) {
    // The frame lands inside its message, and the message inside the posted buffer, in
    // arithmetic that cannot wrap.
    using Wide = unsigned __int128;
    FUZZ_CHECK(Wide{frame.offset} + Wide{frame.length} <= Wide{frame.total});
    FUZZ_CHECK(frame.total <= capacity);
  }
  return 0;
}
