// The fingerprint every collective carries, so that ranks that disagree on what they are doing
// fail loudly instead of mixing data: what it holds, how it travels and how a received message
// is checked against it. Three carriers share the one check (check_message):
// - FingerprintExchange: a message of its own to the right neighbour, for ring-style algorithms,
//   checked at the algorithm's first wait (no extra round trip);
// - recursive doubling: [fingerprint | data] in every message;
// - exchange rounds (direct, window): the first round's messages start with it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "collectives/types.h"
#include "core/deadline.h"
#include "core/error.h"
#include "transport/connection.h"

namespace ringlet::collectives {

// What a rank believes the current collective is. Sent with the first message of each
// collective; all ranks must agree (seq is the collective's number on this communicator).
struct Fingerprint {
  OpKind op = OpKind::all_reduce;
  DType dtype = DType::f32;
  ReduceOp redop = ReduceOp::sum;
  std::uint8_t reserved = 0;
  std::int32_t root = -1;
  std::uint64_t count = 0;
  std::uint64_t seq = 0;
  bool operator==(const Fingerprint&) const = default;
};
static_assert(sizeof(Fingerprint) == 24);

std::string to_string(const Fingerprint& f);  // "all_reduce(count=10, f32, sum, seq=3)"

// Receives that may hold a peer's first message of another collective get this much room beyond
// what they expect, so that a longer message (a recursive-doubling op sends [fingerprint | data])
// is reported as a mismatch, with the peer's fingerprint, rather than as a transport error.
inline constexpr std::size_t kMismatchRoom = 64 * 1024;
// A receive's room for a [fingerprint | payload] message: the message and kMismatchRoom. Sized to
// the message due, not the op's largest: over shm a receive of up to 256 KiB of room is moved by
// the thread that waits for it, a larger one by the progress thread (two hand-offs a message).
inline constexpr std::size_t fingerprinted_room(std::size_t payload_bytes) {
  return sizeof(Fingerprint) + payload_bytes + kMismatchRoom;
}

// The error for a peer whose message shows another collective: names both ranks and both
// fingerprints (theirs when the message held one).
core::CollectiveError mismatch_error(int rank, const Fingerprint& mine, int peer,
                                     const Fingerprint* theirs);

// The one check of a received message: it must be exactly `expected_bytes` long and, when
// `starts_with_fingerprint`, begin with `mine`. Throws mismatch_error otherwise.
void check_message(const char* message, std::size_t bytes, std::size_t expected_bytes,
                   bool starts_with_fingerprint, int rank, const Fingerprint& mine, int peer);

// The fingerprint a message starts with, if it is long enough to hold one.
std::optional<Fingerprint> read_fingerprint(const char* message, std::size_t bytes);

// The fingerprint's own message around the ring: posted before the algorithm's first messages
// (send to the right neighbour, receive from the left) and settled at the algorithm's first
// wait. Its message is first on both connections, so it is complete before any data of the op.
class FingerprintExchange {
 public:
  // Posts the exchange of `mine`; on_match runs once the left neighbour's fingerprint matched.
  // `dry`: an op run for its schedule alone (dry_run.h), whose messages carry no bytes: the left
  // neighbour's is taken to match (a peer in step sends what this rank does).
  void post(transport::Connection& left, transport::Connection& right, const Fingerprint& mine,
            int rank, int left_rank, int right_rank, std::function<void()> on_match,
            bool dry = false);
  bool active() const { return active_; }
  // Waits for both messages (naming in *waiting_on the peer waited on) and checks the left
  // neighbour's; throws mismatch_error. Does nothing when no exchange is pending.
  void settle(core::Deadline deadline, int* waiting_on);
  // After a failure: the mismatch, if the left neighbour's fingerprint arrived and differs
  // (the root cause of what the transport saw next), else null. Ends the exchange.
  std::exception_ptr abandon();

 private:
  std::exception_ptr mismatch() const;

  bool active_ = false;
  bool dry_ = false;
  Fingerprint mine_;
  int rank_ = 0, left_ = 0, right_ = 0;
  std::vector<char> inbox_ = std::vector<char>(sizeof(Fingerprint) + kMismatchRoom);
  transport::RequestPtr send_, recv_;
  std::function<void()> on_match_;  // releases the other channels
};

}  // namespace ringlet::collectives
