// Group: torch's collectives on ringlet (group.h). Each op checks and prepares its tensors
// (tensor_buffers.h), issues ringlet collectives on them and hands their Works to a RingletWork
// with what to do once they are done (write-backs).
#include "group.h"

#include <Python.h>

#include <array>
#include <cstdlib>

#include "core/error.h"
#include "ringlet_work.h"
#include "tensor_buffers.h"
#include "transport/rendezvous.h"

namespace ringlet::torch_backend {
namespace {

using collectives::DType;
using collectives::WorkPtr;

// Where the job's store lives: a loopback store means a loopback job (tcp listens there).
std::string store_host() {
  const char* addr = std::getenv("MASTER_ADDR");
  return addr != nullptr ? addr : "";
}

std::vector<std::size_t> offsets_of(const std::vector<std::size_t>& counts) {
  std::vector<std::size_t> offsets(counts.size());
  for (std::size_t p = 1; p < counts.size(); ++p) offsets[p] = offsets[p - 1] + counts[p - 1];
  return offsets;
}

// all_to_all_single's split sizes (rows of dim 0) as byte counts; none: equal parts.
std::vector<std::size_t> split_bytes_of(const at::Tensor& t,
                                        const std::vector<std::int64_t>& splits, int size,
                                        const char* which) {
  const std::int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  const std::size_t row_bytes = rows == 0 ? 0 : nbytes(t) / static_cast<std::size_t>(rows);
  std::vector<std::size_t> bytes(static_cast<std::size_t>(size));
  if (splits.empty()) {
    RINGLET_CHECK(rows % size == 0, ValueError, "ringlet: alltoall_base: the ", which, " tensor's ",
                  rows, " rows do not split equally over ", size, " ranks");
    for (auto& b : bytes) b = static_cast<std::size_t>(rows / size) * row_bytes;
    return bytes;
  }
  RINGLET_CHECK(static_cast<int>(splits.size()) == size, ValueError,
                "ringlet: alltoall_base: ", splits.size(), " ", which, " split sizes for ", size,
                " ranks");
  std::int64_t sum = 0;
  for (int p = 0; p < size; ++p) {
    RINGLET_CHECK(splits[p] >= 0, ValueError, "ringlet: alltoall_base: ", which, " split ", p,
                  " is negative (", splits[p], ")");
    sum += splits[p];
    bytes[p] = static_cast<std::size_t>(splits[p]) * row_bytes;
  }
  RINGLET_CHECK(sum == rows, ValueError, "ringlet: alltoall_base: the ", which,
                " split sizes add up to ", sum, " rows; the tensor has ", rows);
  return bytes;
}

void check_list(const std::vector<at::Tensor>& list, std::size_t size, const at::Tensor& like,
                const char* op, const char* what) {
  RINGLET_CHECK(list.size() == size, ValueError, "ringlet: ", op, ": ", list.size(), " ", what,
                " tensors for a group of ", size);
  for (const auto& t : list) {
    RINGLET_CHECK(t.numel() == like.numel() && t.scalar_type() == like.scalar_type(), ValueError,
                  "ringlet: ", op, ": every ", what, " tensor must have ", like.numel(), " ",
                  c10::toString(like.scalar_type()), " elements; one has ", t.numel(), " ",
                  c10::toString(t.scalar_type()));
  }
}

}  // namespace

Group::Group(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
             std::chrono::milliseconds timeout)
    : rank_(rank), size_(size), timeout_(timeout), store_(std::make_unique<TorchStore>(store)) {
  const auto deadline = core::Deadline::after(timeout);
  transport::MeshOptions mesh;
  mesh.rank = rank;
  mesh.world_size = size;
  mesh.prefix = "ringlet/mesh";
  mesh.job_token = transport::job_token(*store_, rank, deadline);
  mesh.store_host = store_host();
  collectives::CommOptions options;
  options.name = "ringlet";
  options.timeout = timeout;
  options.timeout_source = "the process group's timeout sets it";
  comm_ = collectives::Communicator::create(*store_, mesh, options, deadline);
}

// Ringlet's threads may need the GIL to finish what they run (a future's Python callback, the
// last reference to a tensor Python owns), so they are joined without it: torch destroys a
// process group with the GIL held.
Group::~Group() {
  const bool held = PyGILState_Check() != 0;
  PyThreadState* saved = held ? PyEval_SaveThread() : nullptr;
  comm_.reset();
  store_.reset();
  if (held) PyEval_RestoreThread(saved);
}

// Flattened tensors of one dtype laid end to end, in pooled memory.
at::Tensor Group::joined(const std::vector<at::Tensor>& flat) {
  std::int64_t total = 0;
  for (const auto& t : flat) total += t.numel();
  at::Tensor out = staging_.empty({total}, flat.front().scalar_type());
  at::cat_out(out, flat);
  return out;
}

WorkRef Group::finish(c10d::OpType type, const char* name, std::vector<at::Tensor> outputs,
                      std::vector<WorkPtr> parts, std::function<void()> after) {
  auto work = c10::make_intrusive<RingletWork>(rank_, type, name, std::move(outputs), timeout_);
  return RingletWork::start(work, std::move(parts), std::move(after));
}

WorkRef Group::broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  at::Tensor& user = single(tensors, "broadcast");
  at::Tensor dense = host_dense(user, "broadcast");
  auto part =
      comm_->broadcast(dense.data_ptr(), nbytes(dense), DType::u8, static_cast<int>(opts.rootRank));
  return finish(c10d::OpType::BROADCAST, "broadcast", tensors, {part}, write_back(user, dense));
}

WorkRef Group::allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  at::Tensor& user = single(tensors, "allreduce");
  const Reducible r = reducible(host_dense(user, "allreduce"), opts.reduceOp, "allreduce");
  auto part = comm_->all_reduce(r.data(), r.data(), r.count(), r.dtype, r.op);
  return finish(c10d::OpType::ALLREDUCE, "allreduce", tensors, {part}, write_back(user, r.buffer));
}

WorkRef Group::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                   const c10d::AllreduceCoalescedOptions& opts) {
  RINGLET_CHECK(!tensors.empty(), ValueError, "ringlet: allreduce_coalesced: no tensors");
  std::vector<at::Tensor> flat;
  for (const auto& t : tensors) flat.push_back(host_dense(t, "allreduce_coalesced").reshape(-1));
  const Reducible r = reducible(joined(flat), opts.reduceOp, "allreduce_coalesced");
  auto part = comm_->all_reduce(r.data(), r.data(), r.count(), r.dtype, r.op);
  return finish(c10d::OpType::ALLREDUCE_COALESCED, "allreduce_coalesced", tensors, {part},
                [tensors, buffer = r.buffer]() mutable {
                  std::int64_t offset = 0;
                  for (auto& t : tensors) {
                    t.copy_(buffer.narrow(0, offset, t.numel()).view(t.sizes()));
                    offset += t.numel();
                  }
                });
}

WorkRef Group::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  at::Tensor& user = single(tensors, "reduce");
  const Reducible r = reducible(host_dense(user, "reduce"), opts.reduceOp, "reduce");
  auto part =
      comm_->reduce(r.data(), r.data(), r.count(), r.dtype, r.op, static_cast<int>(opts.rootRank));
  return finish(c10d::OpType::REDUCE, "reduce", tensors, {part}, write_back(user, r.buffer));
}

WorkRef Group::allgather(TensorLists& outputs, std::vector<at::Tensor>& inputs) {
  const at::Tensor input = host_dense(single(inputs, "allgather"), "allgather");
  RINGLET_CHECK(outputs.size() == 1, ValueError, "ringlet: allgather takes one output list");
  check_list(outputs[0], static_cast<std::size_t>(size_), input, "allgather", "output");
  at::Tensor all = staging_.empty({static_cast<std::int64_t>(nbytes(input)) * size_}, at::kByte);
  auto part = comm_->all_gather(input.data_ptr(), all.data_ptr(), nbytes(input), DType::u8);
  return finish(c10d::OpType::ALLGATHER, "allgather", outputs[0], {part},
                [all, input, out = outputs[0]]() mutable { split_bytes(all, out); });
}

WorkRef Group::allgather_base(at::Tensor& output, at::Tensor& input) {
  const at::Tensor in = host_dense(input, "_allgather_base");
  RINGLET_CHECK(output.numel() == in.numel() * size_ && output.scalar_type() == in.scalar_type(),
                ValueError, "ringlet: _allgather_base: the output must hold ", size_, " x ",
                in.numel(), " ", c10::toString(in.scalar_type()), " elements; it holds ",
                output.numel(), " ", c10::toString(output.scalar_type()));
  at::Tensor out = host_dense(output, "_allgather_base");
  auto part = comm_->all_gather(in.data_ptr(), out.data_ptr(), nbytes(in), DType::u8);
  auto back = write_back(output, out);
  return finish(c10d::OpType::_ALLGATHER_BASE, "_allgather_base", {output}, {part},
                [back, in] { back(); });
}

WorkRef Group::gather(TensorLists& outputs, std::vector<at::Tensor>& inputs,
                      const c10d::GatherOptions& opts) {
  const at::Tensor input = host_dense(single(inputs, "gather"), "gather");
  const int root = static_cast<int>(opts.rootRank);
  at::Tensor all;
  std::vector<at::Tensor> out;
  if (rank_ == root) {
    RINGLET_CHECK(outputs.size() == 1, ValueError,
                  "ringlet: gather takes one output list on the root");
    check_list(outputs[0], static_cast<std::size_t>(size_), input, "gather", "output");
    out = outputs[0];
    all = staging_.empty({static_cast<std::int64_t>(nbytes(input)) * size_}, at::kByte);
  }
  auto part = comm_->gather(input.data_ptr(), rank_ == root ? all.data_ptr() : nullptr,
                            nbytes(input), DType::u8, root);
  return finish(c10d::OpType::GATHER, "gather", out, {part}, [all, input, out]() mutable {
    if (all.defined()) split_bytes(all, out);
  });
}

WorkRef Group::scatter(std::vector<at::Tensor>& outputs, TensorLists& inputs,
                       const c10d::ScatterOptions& opts) {
  at::Tensor& user = single(outputs, "scatter");
  at::Tensor dense = host_dense(user, "scatter");
  const int root = static_cast<int>(opts.rootRank);
  at::Tensor all;
  if (rank_ == root) {
    RINGLET_CHECK(inputs.size() == 1, ValueError,
                  "ringlet: scatter takes one input list on the root");
    check_list(inputs[0], static_cast<std::size_t>(size_), dense, "scatter", "input");
    all = concat_bytes(inputs[0], dense, "scatter", staging_);
  }
  auto part = comm_->scatter(rank_ == root ? all.data_ptr() : nullptr, dense.data_ptr(),
                             nbytes(dense), DType::u8, root);
  auto back = write_back(user, dense);
  return finish(c10d::OpType::SCATTER, "scatter", outputs, {part}, [back, all] { back(); });
}

WorkRef Group::reduce_scatter(std::vector<at::Tensor>& outputs, TensorLists& inputs,
                              const c10d::ReduceScatterOptions& opts) {
  at::Tensor& user = single(outputs, "reduce_scatter");
  RINGLET_CHECK(inputs.size() == 1, ValueError, "ringlet: reduce_scatter takes one input list");
  check_list(inputs[0], static_cast<std::size_t>(size_), user, "reduce_scatter", "input");
  std::vector<at::Tensor> flat;
  for (const auto& t : inputs[0]) flat.push_back(host_dense(t, "reduce_scatter").reshape(-1));
  const Reducible in = reducible(joined(flat), opts.reduceOp, "reduce_scatter");
  at::Tensor out = staging_.empty({user.numel()}, in.buffer.scalar_type());
  auto part = comm_->reduce_scatter(in.data(), out.data_ptr(), out.numel(), in.dtype, in.op);
  return finish(c10d::OpType::REDUCE_SCATTER, "reduce_scatter", outputs, {part},
                [user, out, in = in.buffer]() mutable { user.copy_(out.view(user.sizes())); });
}

WorkRef Group::reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                   const c10d::ReduceScatterOptions& opts) {
  RINGLET_CHECK(
      input.numel() == output.numel() * size_ && output.scalar_type() == input.scalar_type(),
      ValueError, "ringlet: _reduce_scatter_base: the input must hold ", size_, " x ",
      output.numel(), " ", c10::toString(output.scalar_type()), " elements; it holds ",
      input.numel(), " ", c10::toString(input.scalar_type()));
  const Reducible in =
      reducible(host_dense(input, "_reduce_scatter_base"), opts.reduceOp, "_reduce_scatter_base");
  const Reducible out =
      reducible(host_dense(output, "_reduce_scatter_base"), opts.reduceOp, "_reduce_scatter_base");
  auto part = comm_->reduce_scatter(in.data(), out.data(), out.count(), in.dtype, in.op);
  auto back = write_back(output, out.buffer);
  return finish(c10d::OpType::_REDUCE_SCATTER_BASE, "_reduce_scatter_base", {output}, {part},
                [back, keep = in.buffer] { back(); });
}

WorkRef Group::alltoall_base(at::Tensor& output, at::Tensor& input,
                             const std::vector<std::int64_t>& output_splits,
                             const std::vector<std::int64_t>& input_splits) {
  RINGLET_CHECK(output.scalar_type() == input.scalar_type(), DTypeError,
                "ringlet: alltoall_base: a ", c10::toString(input.scalar_type()), " input and a ",
                c10::toString(output.scalar_type()), " output");
  const at::Tensor in = host_dense(input, "alltoall_base");
  at::Tensor out = host_dense(output, "alltoall_base");
  const auto send = split_bytes_of(in, input_splits, size_, "input");
  const auto recv = split_bytes_of(out, output_splits, size_, "output");
  auto part = comm_->all_to_all(in.data_ptr(), send, offsets_of(send), out.data_ptr(), recv,
                                offsets_of(recv), DType::u8);
  auto back = write_back(output, out);
  return finish(c10d::OpType::ALLTOALL_BASE, "alltoall_base", {output}, {part},
                [back, in] { back(); });
}

WorkRef Group::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs) {
  RINGLET_CHECK(
      static_cast<int>(inputs.size()) == size_ && static_cast<int>(outputs.size()) == size_,
      ValueError, "ringlet: alltoall: ", inputs.size(), " inputs and ", outputs.size(),
      " outputs for a group of ", size_, " (one per rank each)");
  std::vector<std::size_t> send, recv;
  for (const auto& t : inputs) send.push_back(nbytes(t));
  for (const auto& t : outputs) recv.push_back(nbytes(t));
  const at::Tensor in = concat_bytes(inputs, inputs[0], "alltoall", staging_);
  at::Tensor out =
      staging_.empty({static_cast<std::int64_t>(offsets_of(recv).back() + recv.back())}, at::kByte);
  auto part = comm_->all_to_all(in.data_ptr(), send, offsets_of(send), out.data_ptr(), recv,
                                offsets_of(recv), DType::u8);
  return finish(c10d::OpType::ALLTOALL, "alltoall", outputs, {part},
                [in, out, outputs]() mutable { split_bytes(out, outputs); });
}

// A message's header: the tag and the length, checked by the receiver (ringlet matches a pair's
// messages in issue order; a tag out of that order is an error, never a silent mix-up).
using Header = std::array<std::int64_t, 2>;

WorkRef Group::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  const at::Tensor dense = host_dense(single(tensors, "send"), "send");
  auto header = std::make_shared<Header>(Header{tag, static_cast<std::int64_t>(nbytes(dense))});
  auto head = comm_->send(header->data(), sizeof(Header), DType::u8, dst);
  auto body = comm_->send(dense.data_ptr(), nbytes(dense), DType::u8, dst);
  return finish(c10d::OpType::SEND, "send", tensors, {head, body}, [header, dense] {});
}

WorkRef Group::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  at::Tensor& user = single(tensors, "recv");
  at::Tensor dense = host_dense(user, "recv");
  auto header = std::make_shared<Header>();
  auto head = comm_->recv(header->data(), sizeof(Header), DType::u8, src);
  auto body = comm_->recv(dense.data_ptr(), nbytes(dense), DType::u8, src);
  auto back = write_back(user, dense);
  const auto expected = static_cast<std::int64_t>(nbytes(dense));
  return finish(c10d::OpType::RECV, "recv", tensors, {head, body},
                [header, back, tag, src, expected, rank = rank_] {
                  RINGLET_CHECK((*header)[0] == tag && (*header)[1] == expected, CollectiveError,
                                "ringlet: rank ", rank, ": recv from rank ", src, " posted tag ",
                                tag, " for ", expected, " bytes; the message has tag ",
                                (*header)[0], " and ", (*header)[1],
                                " bytes (a pair's messages match in the order they were sent)");
                  back();
                });
}

WorkRef Group::barrier() {
  return finish(c10d::OpType::BARRIER, "barrier", {}, {comm_->barrier()});
}

}  // namespace ringlet::torch_backend
