// All-to-all rounds of small messages for the algorithms that read peers' memory (direct,
// window): each rank sends one fixed-size message to every peer and receives one from each.
// They order memory accesses between ranks ("everyone has staged", "nobody reads any more")
// and carry the op's fingerprint in the first round.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "collectives/context.h"

namespace ringlet::collectives {

// Sends `mine` to every peer and receives each peer's message of the same size into
// theirs[peer]; a message of another size is a mismatch (the peer is in another collective).
// Only the first round can meet a peer in another collective: its messages start with the op's
// fingerprint (T's first member; `first_round`), and only its receives have room for a longer
// message. Later rounds follow fingerprints already checked.
template <class T>
void exchange(const ChannelContext& ctx, const T& mine, std::vector<T>& theirs, bool first_round) {
  const int n = ctx.size, r = ctx.rank;
  const std::size_t room = sizeof(T) + (first_round ? kMismatchRoom : 0);
  const std::unique_ptr<char[]> inbox(new char[room * static_cast<std::size_t>(n)]);
  std::vector<transport::RequestPtr> recvs(static_cast<std::size_t>(n)), sends(recvs.size());
  for (int k = 1; k < n; ++k) {
    const int p = (r + k) % n;
    recvs[p] = ctx.peer(p).recv(inbox.get() + p * room, room);
  }
  for (int k = 1; k < n; ++k) {
    const int p = (r + n - k) % n;
    sends[p] = ctx.peer(p).send(&mine, sizeof mine);
  }
  for (int k = 1; k < n; ++k) {
    const int p = (r + k) % n;
    ctx.wait(recvs[p], p);
    ctx.check_message(inbox.get() + p * room, recvs[p]->bytes(), sizeof(T), first_round, p);
    if (ctx.op.dry != nullptr) {
      theirs[p] = mine;  // a dry message carries no bytes; a peer in step sends what this rank does
    } else {
      std::memcpy(&theirs[p], inbox.get() + p * room, sizeof(T));
    }
  }
  for (int k = 1; k < n; ++k) {
    const int p = (r + n - k) % n;
    ctx.wait(sends[p], p);
  }
}

// A round whose message is an 8-byte token naming it; a peer that sends another token is in
// another collective (or another round of it).
void notify_all(const ChannelContext& ctx, std::uint64_t token);

}  // namespace ringlet::collectives
