// Double binary tree all-reduce: the buffer's two halves each go up one binary tree (reduced on
// the way to its root) and come back down it (the root's result broadcast), in chunks, so that a
// chunk moves up while the next one arrives. 2 log2(n) hops of latency instead of the ring's
// 2 (n - 1) steps, at about twice the ring's bytes per rank for ranks inside a tree.
//
//   the trees  tree 0 is the balanced in-order tree over positions 0 .. n-1 (the root is the
//              middle position, each half a subtree); tree 1 is the same tree with every rank
//              moved one position on, so that most ranks that are leaves in one tree are inner
//              nodes in the other and the two trees' work is spread over all ranks
//   up         per chunk: receive each child's partial sum, reduce it into this rank's values,
//              send the result to the parent (the root keeps it: the chunk is final)
//   down       per chunk: receive the final chunk from the parent, send it on to the children
//
// Both trees go up, then both come down: a rank takes its part of tree 0's way up, then of tree
// 1's, so the two trees' hops overlap (a leaf of tree 0, done at once, starts on tree 1; NCCL
// runs its two trees on channels of their own), while each tree's chunks pipeline alone (taking
// a chunk of each in turn tied the two pipelines together: 7-41% slower at 4 and 16 MiB on 4 and 8
// ranks). Every rank takes the steps in the same order, so a message between two ranks is
// received in the order it was sent.
//
// One send per peer is in flight at a time: a rank waits for its previous send to a peer before
// the next. Every message is [fingerprint | chunk] and is checked as it arrives; over shm, a chunk
// that lies whole in the ring is reduced or copied where it lies in the ring, not copied out of it
// first (ChannelContext::receive_fingerprinted). Host buffers (the communicator runs the ring for
// device buffers).
#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <map>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/reduce_kernels.h"

namespace ringlet::collectives {
namespace {

// A rank's place in one tree: its parent and up to two children (-1: none), as ranks.
struct TreeLinks {
  int parent = -1;
  std::array<int, 2> children{-1, -1};
};

// The links of `rank` in tree `t` over n ranks (position p holds rank (p + t) mod n).
TreeLinks tree_links(int n, int t, int rank) {
  const int position = ((rank - t) % n + n) % n;
  const auto to_rank = [&](int p) { return p < 0 ? -1 : (p + t) % n; };
  TreeLinks links;
  int lo = 0, hi = n, parent = -1;
  for (;;) {
    const int mid = lo + (hi - lo) / 2;
    if (position == mid) {
      links.parent = to_rank(parent);
      links.children[0] = mid > lo ? to_rank(lo + (mid - lo) / 2) : -1;
      links.children[1] = hi > mid + 1 ? to_rank(mid + 1 + (hi - mid - 1) / 2) : -1;
      return links;
    }
    parent = mid;
    if (position < mid) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
}

class TreeAllReduce {
 public:
  TreeAllReduce(const ChannelContext& ctx, const char* input, char* data, std::size_t count,
                DType dtype, ReduceOp op)
      : ctx_(ctx),
        input_(input),
        data_(data),
        count_(count),
        dtype_(dtype),
        op_(op),
        es_(core::dtype_size(dtype)),
        chunk_(std::max<std::size_t>(1, ctx.uniform_slice() / es_)),
        capacity_(fingerprinted_room(chunk_ * es_)) {}

  void run() {
    in_ = ctx_.scratch_bytes(capacity_);
    const std::size_t half = count_ / 2;
    const std::array<Half, 2> halves{Half{tree_links(ctx_.size, 0, ctx_.rank), 0, half},
                                     Half{tree_links(ctx_.size, 1, ctx_.rank), half, count_}};
    // Both trees up, then both down: each tree's chunks pipelined alone, and a rank done with
    // its part of one tree's way up (a leaf at once) going on to the other's.
    for (const Half& h : halves) {
      for (std::size_t k = 0; k < chunks(h); ++k) up(h, k);
    }
    settle_sends();  // the way down overwrites what the sends up read
    for (const Half& h : halves) {
      for (std::size_t k = 0; k < chunks(h); ++k) down(h, k);
    }
    settle_sends();
  }

 private:
  // A half of the buffer, [begin, end) in elements, and this rank's place in its tree.
  struct Half {
    TreeLinks links;
    std::size_t begin = 0, end = 0;
  };

  std::size_t chunks(const Half& h) const {
    return std::max<std::size_t>(1, (h.end - h.begin + chunk_ - 1) / chunk_);  // one if empty
  }
  // Chunk k of a half: its first element and its length.
  std::size_t first(const Half& h, std::size_t k) const { return h.begin + k * chunk_; }
  std::size_t length(const Half& h, std::size_t k) const {
    return std::min(chunk_, h.end - std::min(h.end, first(h, k)));
  }

  // Up the tree: the children's partial sums of chunk k reduced into this rank's values, sent on.
  void up(const Half& h, std::size_t k) {
    const auto start = std::chrono::steady_clock::now();
    const std::size_t at = first(h, k), len = length(h, k);
    const char* mine = input_ + at * es_;
    for (const int child : h.links.children) {
      if (child < 0) continue;
      receive(child, len, [&](const char* partial) {
        reduce_within(ctx_, data_ + at * es_, mine, partial, len, dtype_, op_);
      });
      mine = data_ + at * es_;
    }
    if (h.links.parent >= 0) send(h.links.parent, mine, len);
    ctx_.trace(step_++, "up", static_cast<int>(k), neighbour(h.links), len * es_, start);
  }

  // Down the tree: the final chunk k from the parent (the root has it), sent to the children.
  void down(const Half& h, std::size_t k) {
    const auto start = std::chrono::steady_clock::now();
    const std::size_t at = first(h, k), len = length(h, k);
    char* chunk = data_ + at * es_;
    if (h.links.parent >= 0) {
      receive(h.links.parent, len,
              [&](const char* final) { copy_within(ctx_, chunk, final, len * es_); });
    }
    for (const int child : h.links.children) {
      if (child >= 0) send(child, chunk, len);
    }
    ctx_.trace(step_++, "down", static_cast<int>(k), neighbour(h.links), len * es_, start);
  }

  // The peer a step's trace names: the parent, or the root's first child.
  static int neighbour(const TreeLinks& links) {
    return links.parent >= 0 ? links.parent : links.children[0];
  }

  // Waits for `peer`'s next message, checks that it is this op's, `len` elements long, and hands
  // its chunk to use(chunk): where it lies in the transport where it can (shm, a chunk it sent at
  // once), saving its copy out; else received into scratch first.
  template <class Use>
  void receive(int peer, std::size_t len, Use use) {
    ctx_.receive_fingerprinted(peer, in_, fingerprinted_room(len * es_), len * es_, es_, use);
  }

  // [fingerprint | part] to `peer`, after the previous send to it has gone.
  void send(int peer, const char* part, std::size_t len) {
    Pending& p = pending_[peer];
    if (p.request) ctx_.wait(p.request, peer);
    p.request = ctx_.send_fingerprinted(peer, part, len * es_, p.staged);
  }

  void settle_sends() {
    for (auto& [peer, p] : pending_) {
      if (p.request) ctx_.wait(p.request, peer);
      p.request = nullptr;
    }
  }

  struct Pending {
    transport::RequestPtr request;
    std::vector<char> staged;  // the message, where the transport cannot send two pieces
  };

  const ChannelContext& ctx_;
  const char* input_;
  char* data_;
  std::size_t count_;
  DType dtype_;
  ReduceOp op_;
  std::size_t es_, chunk_;
  // Room for a longer message: a peer that issued another op is a mismatch.
  std::size_t capacity_;
  char* in_ = nullptr;
  std::map<int, Pending> pending_;
  int step_ = 0;
};

}  // namespace

void tree_all_reduce(const ChannelContext& ctx, const char* input, char* data, std::size_t count,
                     DType dtype, ReduceOp op) {
  TreeAllReduce(ctx, input, data, count, dtype, op).run();
}

}  // namespace ringlet::collectives
