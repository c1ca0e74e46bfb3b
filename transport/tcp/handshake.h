// The first bytes on every ringlet TCP connection, and the frame header that follows.
// Hello (client -> server): magic, protocol version, job token, sender rank, socket index and
// count. The server answers with an Ack (magic + status). A stranger (bad magic), another
// protocol version or another job (token) is refused and logged; nothing else is read from it.
// All integers travel little-endian (the x86/ARM native order; checked at compile time).
#pragma once

#include <bit>
#include <cstdint>
#include <string>

namespace ringlet::transport::tcp {

static_assert(std::endian::native == std::endian::little, "wire format assumes little-endian");

inline constexpr std::uint32_t kHelloMagic = 0x544c4752;  // "RGLT"
inline constexpr std::uint32_t kFrameMagic = 0x46524752;  // "RGRF"
inline constexpr std::uint16_t kProtocolVersion = 2;

struct Hello {
  std::uint32_t magic = kHelloMagic;
  std::uint16_t version = kProtocolVersion;
  std::uint16_t reserved = 0;
  std::uint64_t job_token = 0;
  std::uint32_t rank = 0;
  std::uint32_t socket_index = 0;
  std::uint32_t socket_count = 0;
  std::uint32_t peer_rank = 0;  // the rank the sender believes it is talking to
};
static_assert(sizeof(Hello) == 32);

enum class AckStatus : std::uint32_t { ok = 0, bad_version = 1, wrong_job = 2, unexpected = 3 };

struct Ack {
  std::uint32_t magic = kHelloMagic;
  AckStatus status = AckStatus::ok;
};
static_assert(sizeof(Ack) == 8);

// Frame flags. A goodbye frame (no payload) is the last frame a socket carries when its
// connection is closed in an orderly way; a socket that ends without one (EOF, reset) means
// the peer died, and the connection fails at once.
inline constexpr std::uint32_t kFrameGoodbye = 1;

// One frame: `length` bytes of message `seq` at `offset`; the whole message is `total` bytes.
struct FrameHeader {
  std::uint32_t magic = kFrameMagic;
  std::uint32_t flags = 0;
  std::uint64_t seq = 0;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  std::uint64_t total = 0;
};
static_assert(sizeof(FrameHeader) == 40);

// Why a Hello is refused (AckStatus::ok when it is acceptable). `world_size` bounds the rank.
AckStatus check_hello(const Hello& hello, std::uint64_t job_token, int local_rank, int world_size);
std::string describe(AckStatus status);
// Empty when the header is well formed and fits a posted buffer of `capacity` bytes;
// otherwise what is wrong (the caller turns it into a PeerError).
std::string check_frame(const FrameHeader& header, std::uint64_t capacity);

}  // namespace ringlet::transport::tcp
