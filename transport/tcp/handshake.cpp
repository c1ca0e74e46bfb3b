// Validation of handshakes and frame headers: everything a peer claims is checked before it is
// used, and a claimed length never drives an allocation (frames land in posted buffers).
#include "transport/tcp/handshake.h"

#include "core/error.h"

namespace ringlet::transport::tcp {

AckStatus check_hello(const Hello& hello, std::uint64_t job_token, int local_rank, int world_size) {
  if (hello.version != kProtocolVersion) return AckStatus::bad_version;
  if (hello.job_token != job_token) return AckStatus::wrong_job;
  if (hello.rank >= static_cast<std::uint32_t>(world_size) ||
      hello.peer_rank != static_cast<std::uint32_t>(local_rank) || hello.socket_count == 0 ||
      hello.socket_index >= hello.socket_count) {
    return AckStatus::unexpected;
  }
  return AckStatus::ok;
}

std::string describe(AckStatus status) {
  switch (status) {
    case AckStatus::ok: return "accepted";
    case AckStatus::bad_version: return "protocol version mismatch";
    case AckStatus::wrong_job: return "job token mismatch (a connection from another job)";
    case AckStatus::unexpected: return "unexpected rank or socket index";
  }
  return "unknown status";
}

std::string check_frame(const FrameHeader& h, std::uint64_t capacity) {
  if (h.magic != kFrameMagic) return core::str("bad frame magic 0x", std::hex, h.magic);
  if ((h.flags & ~kFrameGoodbye) != 0)
    return core::str("unknown frame flags 0x", std::hex, h.flags);
  if (h.length > h.total || h.offset > h.total - h.length) {
    return core::str("frame [", h.offset, ", +", h.length, ") outside its message of ", h.total,
                     " bytes");
  }
  if (h.total > capacity) {
    return core::str("message of ", h.total, " bytes is longer than the posted receive buffer of ",
                     capacity, " bytes");
  }
  return {};
}

}  // namespace ringlet::transport::tcp
