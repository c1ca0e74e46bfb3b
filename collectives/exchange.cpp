// notify_all, the token round of exchange.h.
#include "collectives/exchange.h"

namespace ringlet::collectives {

void notify_all(const ChannelContext& ctx, std::uint64_t token) {
  std::vector<std::uint64_t> theirs(static_cast<std::size_t>(ctx.size));
  exchange(ctx, token, theirs, false);
  for (int p = 0; p < ctx.size; ++p) {
    if (p != ctx.rank && theirs[p] != token) throw ctx.mismatch_error(p);
  }
}

}  // namespace ringlet::collectives
