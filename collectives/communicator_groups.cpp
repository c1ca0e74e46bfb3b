// The personalized collectives (gather, scatter, all-to-all: personalized.cpp has the
// algorithms) and sub-communicators (new_group). Validation at issue time, as communicator.cpp's
// collectives do; the op then runs on channel 0 with the fingerprint exchange of the ring
// neighbours checked at its first wait.
#include "collectives/communicator.h"
#include "collectives/communicator_impl.h"

namespace ringlet::collectives {
namespace {

// n blocks of `count` elements laid end to end from `base`.
template <class Blocks, class Pointer>
Blocks equal_blocks(Pointer base, int n, std::size_t count, DType dtype) {
  Blocks blocks(static_cast<std::size_t>(n));
  const std::size_t bytes = count * core::dtype_size(dtype);
  for (int p = 0; p < n; ++p) {
    blocks[p] = {base == nullptr ? nullptr : base + p * bytes, bytes};
  }
  return blocks;
}

}  // namespace

WorkPtr Communicator::gather(const void* send, void* recv, std::size_t count, DType dtype,
                             int root) {
  impl_->check_dtype(dtype, "gather");
  impl_->check_rank(root, "root", "gather");
  impl_->check_buffer(send, count, "send buffer", "gather");
  if (impl_->rank == root) impl_->check_buffer(recv, count, "recv buffer on the root", "gather");
  const ConstBlock mine{static_cast<const char*>(send), count * core::dtype_size(dtype)};
  const auto blocks = equal_blocks<std::vector<Block>>(
      impl_->rank == root ? static_cast<char*>(recv) : nullptr, impl_->size, count, dtype);
  Fingerprint fp{OpKind::gather, dtype, ReduceOp::sum, 0, root, count, 0};
  return impl_->submit(OpKind::gather, true, fp, 0,
                       [=](ChannelContext& ctx) { flat_gather(ctx, mine, blocks, root); });
}

WorkPtr Communicator::scatter(const void* send, void* recv, std::size_t count, DType dtype,
                              int root) {
  impl_->check_dtype(dtype, "scatter");
  impl_->check_rank(root, "root", "scatter");
  if (impl_->rank == root) impl_->check_buffer(send, count, "send buffer on the root", "scatter");
  impl_->check_buffer(recv, count, "recv buffer", "scatter");
  const Block mine{static_cast<char*>(recv), count * core::dtype_size(dtype)};
  const auto blocks = equal_blocks<std::vector<ConstBlock>>(
      impl_->rank == root ? static_cast<const char*>(send) : nullptr, impl_->size, count, dtype);
  Fingerprint fp{OpKind::scatter, dtype, ReduceOp::sum, 0, root, count, 0};
  return impl_->submit(OpKind::scatter, true, fp, 0,
                       [=](ChannelContext& ctx) { flat_scatter(ctx, blocks, mine, root); });
}

WorkPtr Communicator::all_to_all(const void* send, const std::vector<std::size_t>& send_counts,
                                 const std::vector<std::size_t>& send_offsets, void* recv,
                                 const std::vector<std::size_t>& recv_counts,
                                 const std::vector<std::size_t>& recv_offsets, DType dtype) {
  impl_->check_dtype(dtype, "all_to_all");
  const auto n = static_cast<std::size_t>(impl_->size);
  for (const auto* list : {&send_counts, &send_offsets, &recv_counts, &recv_offsets}) {
    RINGLET_CHECK(list->size() == n, ValueError, "all_to_all: ", list->size(),
                  " counts or offsets given for a communicator of size ", n,
                  " (one per rank in each list)");
  }
  const std::size_t es = core::dtype_size(dtype);
  std::vector<ConstBlock> out(n);
  std::vector<Block> in(n);
  for (std::size_t p = 0; p < n; ++p) {
    impl_->check_buffer(send, send_counts[p], "send buffer", "all_to_all");
    impl_->check_buffer(recv, recv_counts[p], "recv buffer", "all_to_all");
    out[p] = {static_cast<const char*>(send) + send_offsets[p] * es, send_counts[p] * es};
    in[p] = {static_cast<char*>(recv) + recv_offsets[p] * es, recv_counts[p] * es};
  }
  RINGLET_CHECK(send_counts[impl_->rank] == recv_counts[impl_->rank], ValueError,
                "all_to_all: rank ", impl_->rank, " sends itself ", send_counts[impl_->rank],
                " elements but expects ", recv_counts[impl_->rank]);
  // The counts may differ from rank to rank: the fingerprint holds none, and each received
  // block's length is checked instead.
  Fingerprint fp{OpKind::all_to_all, dtype, ReduceOp::sum, 0, -1, 0, 0};
  return impl_->submit(OpKind::all_to_all, true, fp, 0,
                       [=](ChannelContext& ctx) { pairwise_all_to_all(ctx, out, in); });
}

WorkPtr Communicator::all_to_all(const void* send, void* recv, std::size_t count, DType dtype) {
  const auto n = static_cast<std::size_t>(impl_->size);
  std::vector<std::size_t> counts(n, count), offsets(n);
  for (std::size_t p = 0; p < n; ++p) offsets[p] = p * count;
  return all_to_all(send, counts, offsets, recv, counts, offsets, dtype);
}

std::unique_ptr<Communicator> Communicator::new_group(const std::vector<int>& ranks,
                                                      core::Deadline deadline) {
  std::vector<bool> seen(static_cast<std::size_t>(impl_->size));
  for (int r : ranks) {
    impl_->check_rank(r, "rank", "new_group");
    RINGLET_CHECK(!seen[r], ValueError, "new_group: rank ", r, " is listed twice");
    seen[r] = true;
  }
  RINGLET_CHECK(!ranks.empty(), ValueError, "new_group: the list of ranks is empty");
  std::uint64_t id = 0;
  {
    std::lock_guard lock(impl_->mutex);
    id = impl_->next_group++;
  }
  const auto me = std::find(ranks.begin(), ranks.end(), impl_->rank);
  if (me == ranks.end()) return nullptr;
  transport::MeshOptions mesh = impl_->mesh_given;
  mesh.rank = static_cast<int>(me - ranks.begin());
  mesh.world_size = static_cast<int>(ranks.size());
  mesh.prefix = core::str(mesh.prefix, "/group", id);
  mesh.port = 0;  // the parent's port is taken
  CommOptions options = impl_->options_given;
  options.name = core::str(impl_->options.name, "/group", id);
  options.timeout = impl_->options.timeout;
  if (!impl_->options.trace_dir.empty()) {
    options.trace_dir = core::str(impl_->options.trace_dir, "/group", id);
  }
  return create(impl_->store, mesh, options, deadline);
}

}  // namespace ringlet::collectives
