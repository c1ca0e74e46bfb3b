// The device protocols: barriers on flags, and each collective as pieces of the staged area
// between a pair of barriers.
#include "collectives/device_collectives.h"

#include <algorithm>

#include "collectives/context.h"
#include "collectives/device_issue.h"
#include "core/error.h"

namespace ringlet::collectives {

namespace {

// Rank r tells every peer it reached `slot`, then waits for every peer to have reached it.
void barrier(DeviceIssue& d, const DeviceGroup& g, int slot) {
  const int n = g.size, r = g.rank;
  for (int k = 1; k < n; ++k) d.signal(g.flag((r + k) % n, slot, r));
  for (int k = 1; k < n; ++k) d.wait_flag(g.flag(r, slot, (r + k) % n));
}

const char* at(const void* base, std::size_t elements, std::size_t es) {
  return static_cast<const char*>(base) + elements * es;
}
char* at(void* base, std::size_t elements, std::size_t es) {
  return static_cast<char*>(base) + elements * es;
}

// The pieces [begin, begin + m) of `count` elements, at most `piece` each; at least one call
// when count is 0 is not made.
template <class F>
void for_pieces(std::size_t count, std::size_t piece, F body) {
  RINGLET_CHECK(piece > 0, Error, "device collective: the window has no room for one element");
  for (std::size_t begin = 0; begin < count; begin += piece) {
    body(begin, std::min(piece, count - begin));
  }
}

void one_shot(DeviceIssue& d, const DeviceGroup& g, const void* input, void* output,
              std::size_t count, DType dtype, ReduceOp op) {
  const std::size_t es = core::dtype_size(dtype);
  RINGLET_CHECK(count * es <= g.area_bytes(), Error, "one-shot all-reduce of ", count * es,
                " bytes: larger than the staged area (", g.area_bytes(), " bytes)");
  d.copy(g.staged(g.rank), input, count * es);
  barrier(d, g, 0);
  std::vector<const void*> srcs;
  for (int p = 0; p < g.size; ++p) srcs.push_back(g.staged(p));
  d.reduce(output, srcs, count, dtype, op);
  barrier(d, g, 1);
}

void two_shot(DeviceIssue& d, const DeviceGroup& g, const void* input, void* output,
              std::size_t count, DType dtype, ReduceOp op) {
  const int n = g.size, r = g.rank;
  const std::size_t es = core::dtype_size(dtype);
  for_pieces(count, g.area_bytes() / es, [&](std::size_t begin, std::size_t m) {
    const auto offset = [&](int q) { return split_offset(m, n, q); };
    const auto length = [&](int q) { return offset(q + 1) - offset(q); };
    for (int k = 1; k < n; ++k) {
      const int q = (r + k) % n;
      d.copy(at(g.staged(r), offset(q), es), at(input, begin + offset(q), es), length(q) * es);
    }
    barrier(d, g, 0);
    std::vector<const void*> srcs;
    for (int p = 0; p < n; ++p) {
      srcs.push_back(p == r ? at(input, begin + offset(r), es) : at(g.staged(p), offset(r), es));
    }
    if (length(r) > 0) d.reduce(at(g.results(r), offset(r), es), srcs, length(r), dtype, op);
    barrier(d, g, 1);
    for (int k = 0; k < n; ++k) {
      const int q = (r + k) % n;
      d.copy(at(output, begin + offset(q), es), at(g.results(q), offset(q), es), length(q) * es);
    }
  });
}

}  // namespace

void device_all_reduce(DeviceIssue& d, const DeviceGroup& g, DeviceAlgorithm algorithm,
                       const void* input, void* output, std::size_t count, DType dtype,
                       ReduceOp op) {
  const std::size_t es = core::dtype_size(dtype);
  if (g.size == 1) {
    if (input != output) d.copy(output, input, count * es);
    return;
  }
  if (count == 0) return;
  if (algorithm == DeviceAlgorithm::one_shot) {
    one_shot(d, g, input, output, count, dtype, op);
  } else {
    two_shot(d, g, input, output, count, dtype, op);
  }
  if (op == ReduceOp::avg) d.divide_by(output, count, dtype, g.size);
}

void device_reduce_scatter(DeviceIssue& d, const DeviceGroup& g, const void* send, void* recv,
                           std::size_t recv_count, DType dtype, ReduceOp op) {
  const int n = g.size, r = g.rank;
  const std::size_t es = core::dtype_size(dtype);
  if (n == 1) {
    if (send != recv) d.copy(recv, send, recv_count * es);
    return;
  }
  // The staged area holds one piece of every block: block q's at q x piece.
  const std::size_t piece = g.area_bytes() / es / static_cast<std::size_t>(n);
  for_pieces(recv_count, piece, [&](std::size_t begin, std::size_t m) {
    for (int k = 1; k < n; ++k) {
      const int q = (r + k) % n;
      d.copy(at(g.staged(r), q * piece, es), at(send, q * recv_count + begin, es), m * es);
    }
    barrier(d, g, 0);
    std::vector<const void*> srcs;
    for (int p = 0; p < n; ++p) {
      srcs.push_back(p == r ? at(send, r * recv_count + begin, es)
                            : at(g.staged(p), r * piece, es));
    }
    d.reduce(at(recv, begin, es), srcs, m, dtype, op);
    barrier(d, g, 1);
  });
  if (op == ReduceOp::avg) d.divide_by(recv, recv_count, dtype, n);
}

void device_all_gather(DeviceIssue& d, const DeviceGroup& g, const void* send, void* recv,
                       std::size_t send_count, DType dtype) {
  const int n = g.size, r = g.rank;
  const std::size_t es = core::dtype_size(dtype);
  const auto block = [&](int p, std::size_t begin) { return at(recv, p * send_count + begin, es); };
  if (n == 1) {
    if (send != recv) d.copy(recv, send, send_count * es);
    return;
  }
  for_pieces(send_count, g.area_bytes() / es, [&](std::size_t begin, std::size_t m) {
    d.copy(g.staged(r), at(send, begin, es), m * es);
    barrier(d, g, 0);
    for (int k = 1; k < n; ++k) {
      const int p = (r + k) % n;
      d.copy(block(p, begin), g.staged(p), m * es);
    }
    barrier(d, g, 1);
  });
  if (block(r, 0) != send) d.copy(block(r, 0), send, send_count * es);
}

void device_broadcast(DeviceIssue& d, const DeviceGroup& g, void* data, std::size_t count,
                      DType dtype, int root) {
  if (g.size == 1) return;
  const std::size_t es = core::dtype_size(dtype);
  for_pieces(count, g.area_bytes() / es, [&](std::size_t begin, std::size_t m) {
    if (g.rank == root) d.copy(g.staged(root), at(data, begin, es), m * es);
    barrier(d, g, 0);
    if (g.rank != root) d.copy(at(data, begin, es), g.staged(root), m * es);
    barrier(d, g, 1);
  });
}

void device_reduce(DeviceIssue& d, const DeviceGroup& g, const void* send, void* recv,
                   std::size_t count, DType dtype, ReduceOp op, int root) {
  const std::size_t es = core::dtype_size(dtype);
  if (g.size == 1) {
    if (send != recv) d.copy(recv, send, count * es);
    return;
  }
  for_pieces(count, g.area_bytes() / es, [&](std::size_t begin, std::size_t m) {
    d.copy(g.staged(g.rank), at(send, begin, es), m * es);
    barrier(d, g, 0);
    if (g.rank == root) {
      std::vector<const void*> srcs;
      for (int p = 0; p < g.size; ++p) srcs.push_back(g.staged(p));
      d.reduce(at(recv, begin, es), srcs, m, dtype, op);
    }
    barrier(d, g, 1);
  });
  if (op == ReduceOp::avg && g.rank == root) d.divide_by(recv, count, dtype, g.size);
}

}  // namespace ringlet::collectives
