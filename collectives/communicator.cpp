// Communicator: validation at issue time, the op's fingerprint and algorithm, and how a channel
// runs one op (execute). The jobs around it live in their own files: options.cpp (settings,
// once), peer_memory.cpp (what ranks can do with each other's memory), scheduler.cpp (channels,
// threads, issue order, inline runs), failure_policy.cpp (first failure wins, published,
// connections aborted), algorithm_choice.cpp (which all-reduce algorithm).
#include "collectives/communicator.h"

#include "collectives/communicator_impl.h"

namespace ringlet::collectives {

std::unique_ptr<Communicator> Communicator::create(transport::Store& store,
                                                   const transport::MeshOptions& mesh,
                                                   CommOptions options, core::Deadline deadline) {
  auto impl = std::make_unique<Impl>(store, mesh, resolve_options(options, mesh.world_size));
  impl->mesh_given = mesh;
  impl->options_given = options;
  if (!options.timeout_source.empty()) impl->failures.set_timeout_source(options.timeout_source);
  impl->connect_channels(mesh, deadline);
  impl->agree_on_peer_memory(mesh, deadline);
  impl->learn_topology();
  impl->scheduler.start();
  impl->start_status_board();
  std::unique_ptr<Communicator> comm(new Communicator(std::move(impl)));
  comm->impl_->transport_label = comm->transports();
  return comm;
}

Communicator::Communicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Communicator::~Communicator() {
  impl_->scheduler.stop();
  impl_->stopped = true;
  impl_->status.reset();  // its last entry says the communicator closed
}

int Communicator::rank() const { return impl_->rank; }
int Communicator::size() const { return impl_->size; }
std::chrono::milliseconds Communicator::timeout() const { return impl_->options.timeout; }

std::string Communicator::transports() const {
  std::set<std::string> names;
  for (int p = 0; p < impl_->size; ++p) {
    if (p != impl_->rank) names.insert(impl_->scheduler.mesh(0).peer(p).transport());
  }
  std::string joined;
  for (const std::string& name : names) joined += (joined.empty() ? "" : "+") + name;
  return joined.empty() ? "none" : joined;
}

Algorithm Communicator::all_reduce_algorithm(std::size_t bytes, const BufferSpace* space) const {
  PeerAccess access = impl_->access;
  access.device_windows = space != nullptr && !space->windows().empty();
  const DeviceSpace* flags = space != nullptr ? space->device_flags() : nullptr;
  access.device_flags = flags != nullptr;
  if (flags != nullptr && impl_->size > 1)
    access.device_area_bytes = flags->device_group().area_bytes();
  return choose_all_reduce(impl_->options.algo, impl_->options.thresholds, access, impl_->size,
                           bytes, space != nullptr ? Buffers::device : Buffers::host);
}

namespace {

// avg is a sum divided once at the end, by the host's kernel or the device's.
void divide_for_avg(const ChannelContext& ctx, char* data, std::size_t count, DType dtype,
                    ReduceOp op) {
  if (op != ReduceOp::avg) return;
  if (ctx.space() != nullptr) {
    ctx.space()->divide_by(data, count, dtype, ctx.size);
  } else {
    divide_by(data, count, dtype, ctx.size);
  }
}

// What an all-reduce runs on besides its buffers: the shared windows (the host's, or a device
// space's) and the hierarchical all-reduce's rings.
struct AllReducePlan {
  Algorithm algorithm;
  const Windows* host_windows;
  const HostRings* rings;
};

// Device buffers for a host algorithm: the input copied into the space's pinned staging, the
// algorithm run there in place, the result copied back: two copies of the buffer over the
// device's link and the reductions on the host, for the latency-bound sizes these are for.
template <class Run>
void run_staged(const ChannelContext& ctx, const char* input, char* data, std::size_t bytes,
                Run run) {
  BufferSpace& space = *ctx.space();
  char* host = space.staging(0, bytes);
  space.copy(host, input, bytes);
  space.fence();
  {
    const HostBuffersScope on_host(ctx);
    run(static_cast<const char*>(host), host);
  }
  space.copy(data, host, bytes);
  space.fence();
}

// Rabenseifner's and the tree on the host, or staged for device buffers.
template <class Run>
void run_host_algorithm(const ChannelContext& ctx, const char* input, char* data, std::size_t bytes,
                        Run run) {
  if (ctx.space() == nullptr) return run(input, data);
  run_staged(ctx, input, data, bytes, run);
}

// One channel's all-reduce of data[0, count) (input == data in place). A single rank only
// copies; every algorithm runs with two ranks or more.
void run_all_reduce(const ChannelContext& ctx, const AllReducePlan& plan, const char* input,
                    char* data, std::size_t count, DType dtype, ReduceOp op) {
  if (ctx.size == 1) {
    copy_within(ctx, data, input, count * core::dtype_size(dtype));
    return;
  }
  switch (plan.algorithm) {
    case Algorithm::recursive_doubling: rd_all_reduce(ctx, input, data, count, dtype, op); break;
    case Algorithm::rabenseifner:
      run_host_algorithm(ctx, input, data, count * core::dtype_size(dtype),
                         [&](const char* in, char* out) {
                           rabenseifner_all_reduce(ctx, in, out, count, dtype, op);
                         });
      break;
    case Algorithm::tree:
      run_host_algorithm(
          ctx, input, data, count * core::dtype_size(dtype),
          [&](const char* in, char* out) { tree_all_reduce(ctx, in, out, count, dtype, op); });
      break;
    case Algorithm::direct: direct_all_reduce(ctx, input, data, count, dtype, op); break;
    case Algorithm::ring: ring_all_reduce(ctx, input, data, count, dtype, op); break;
    case Algorithm::window: {
      BufferSpace* space = ctx.space();
      const Windows device_windows =
          space != nullptr ? Windows{space->windows(), space->window_bytes()} : Windows{};
      const Windows& windows = space != nullptr ? device_windows : *plan.host_windows;
      window_all_reduce(ctx, windows, input, data, count, dtype, op);
      break;
    }
    case Algorithm::hierarchical:
      hierarchical_all_reduce(ctx, *plan.rings, input, data, count, dtype, op);
      break;
    case Algorithm::one_shot:
    case Algorithm::two_shot:
    case Algorithm::bruck:
    case Algorithm::halving:
    case Algorithm::doubling:
      RINGLET_THROW(Error, "rank ", ctx.rank, ": ", algorithm_name(plan.algorithm),
                    " is not a host all-reduce");
  }
  divide_for_avg(ctx, data, count, dtype, op);
}

}  // namespace

WorkPtr Communicator::all_reduce(const void* send, void* recv, std::size_t count, DType dtype,
                                 ReduceOp op, BufferSpace* space) {
  impl_->check_dtype(dtype, "all_reduce");
  impl_->check_reduce_op(dtype, op, "all_reduce");
  impl_->check_buffer(send, count, "send buffer", "all_reduce");
  impl_->check_buffer(recv, count, "recv buffer", "all_reduce");
  const std::size_t es = core::dtype_size(dtype);
  Fingerprint fp{OpKind::all_reduce, dtype, op, 0, -1, count, 0};
  const auto* in = static_cast<const char*>(send);
  auto* out = static_cast<char*>(recv);
  const AllReducePlan plan{all_reduce_algorithm(count * es, space), &impl_->host_windows,
                           &impl_->host_rings};
  if (core::log_enabled(core::LogLevel::debug)) {
    core::log(core::LogLevel::debug, "rank ", impl_->rank, ": all_reduce of ", count * es,
              " bytes (", core::dtype_name(dtype), ", ", reduce_op_name(op), ") runs ",
              algorithm_name(plan.algorithm), " over ", transports(),
              space != nullptr ? " on device buffers" : "");
  }
  // One-shot and two-shot run on the device (device flags); any other algorithm, on a device
  // space too, is driven by the host through the space's staged copies and windows.
  if (plan.algorithm == Algorithm::one_shot || plan.algorithm == Algorithm::two_shot) {
    const auto algorithm = plan.algorithm == Algorithm::one_shot ? DeviceAlgorithm::one_shot
                                                                 : DeviceAlgorithm::two_shot;
    return impl_->issue_on_device(
        OpKind::all_reduce, fp, *space->device_flags(), [=](DeviceIssue& d, const DeviceGroup& g) {
          device_all_reduce(d, g, algorithm, send, recv, count, dtype, op);
        });
  }
  // The rings check the fingerprint through channel 0's exchange with the neighbours; the
  // others carry it in their own messages. Only host rings split over channels.
  const bool rings = checks_fingerprint_apart(plan.algorithm);
  const int channels = impl_->scheduler.channels();
  if (!rings || channels == 1 || space != nullptr) {
    return impl_->submit(
        OpKind::all_reduce, true, fp, 0,
        [=](ChannelContext& ctx) { run_all_reduce(ctx, plan, in, out, count, dtype, op); }, {},
        !rings, space, FlightOp::with_algorithm(algorithm_name(plan.algorithm)));
  }
  return impl_->submit(
      OpKind::all_reduce, true, fp, -1, {},
      [=](ChannelContext& ctx, int c) {
        const std::size_t begin = split_offset(count, channels, c);
        const std::size_t end = split_offset(count, channels, c + 1);
        run_all_reduce(ctx, plan, in + begin * es, out + begin * es, end - begin, dtype, op);
      },
      false, nullptr, FlightOp::with_algorithm(algorithm_name(plan.algorithm)));
}

namespace {

// A host reduce-scatter's working buffer, one per channel, kept across ops (a buffer of the
// whole input's size, made and faulted in for every op, cost more than the op's transfers).
struct ReduceScatterBuffer {
  std::vector<char> bytes;
};

}  // namespace

WorkPtr Communicator::reduce_scatter(const void* send, void* recv, std::size_t recv_count,
                                     DType dtype, ReduceOp op, BufferSpace* space) {
  impl_->check_dtype(dtype, "reduce_scatter");
  impl_->check_reduce_op(dtype, op, "reduce_scatter");
  impl_->check_buffer(send, recv_count, "send buffer", "reduce_scatter");
  impl_->check_buffer(recv, recv_count, "recv buffer", "reduce_scatter");
  const std::size_t es = core::dtype_size(dtype);
  const int n = impl_->size, r = impl_->rank;
  Fingerprint fp{OpKind::reduce_scatter, dtype, op, 0, -1, recv_count, 0};
  if (DeviceSpace* flags = space != nullptr ? space->device_flags() : nullptr) {
    return impl_->issue_on_device(OpKind::reduce_scatter, fp, *flags,
                                  [=](DeviceIssue& d, const DeviceGroup& g) {
                                    device_reduce_scatter(d, g, send, recv, recv_count, dtype, op);
                                  });
  }
  const Algorithm algorithm = reduce_scatter_algorithm(space);
  return impl_->submit(
      OpKind::reduce_scatter, true, fp, 0,
      [=](ChannelContext& ctx) {
        // The working buffer: on a device the space's scratch, holding a copy of the input; on
        // the host the channel's, kept across ops, the ring or recursive halving reading the
        // input where it lies.
        const std::size_t bytes = recv_count * n * es;
        char* work = nullptr;
        if (space != nullptr && algorithm == Algorithm::halving) {
          // Recursive halving on device buffers: in the space's pinned staging, on the host.
          char* in = space->staging(0, bytes);
          work = space->staging(1, bytes);
          copy_within(ctx, in, send, bytes);
          const HostBuffersScope on_host(ctx);
          halving_reduce_scatter(ctx, in, work, recv_count, dtype, op);
        } else if (space != nullptr) {
          work = space->scratch(bytes);
          copy_within(ctx, work, send, bytes);
          ring_reduce_scatter_blocks(ctx, work, recv_count, dtype, op);
        } else {
          std::vector<char>& kept = ctx.states.get<ReduceScatterBuffer>().bytes;
          if (kept.size() < bytes) kept.resize(bytes);
          work = kept.data();
          if (algorithm == Algorithm::halving) {
            halving_reduce_scatter(ctx, static_cast<const char*>(send), work, recv_count, dtype,
                                   op);
          } else {
            ring_reduce_scatter(ctx, static_cast<const char*>(send), work,
                                balanced(recv_count * n, n), dtype, op);
          }
        }
        char* mine = work + r * recv_count * es;
        divide_for_avg(ctx, mine, recv_count, dtype, op);
        copy_within(ctx, recv, mine, recv_count * es);
      },
      {}, !checks_fingerprint_apart(algorithm), space,
      FlightOp::with_algorithm(algorithm_name(algorithm)));
}

Algorithm Communicator::all_gather_algorithm(const BufferSpace* space) const {
  return choose_all_gather(impl_->options.algo, impl_->size,
                           space != nullptr ? Buffers::device : Buffers::host);
}

Algorithm Communicator::reduce_scatter_algorithm(const BufferSpace* space) const {
  return choose_reduce_scatter(impl_->options.algo, impl_->size,
                               space != nullptr ? Buffers::device : Buffers::host);
}

WorkPtr Communicator::all_gather(const void* send, void* recv, std::size_t send_count, DType dtype,
                                 BufferSpace* space) {
  impl_->check_dtype(dtype, "all_gather");
  impl_->check_buffer(send, send_count, "send buffer", "all_gather");
  impl_->check_buffer(recv, send_count, "recv buffer", "all_gather");
  const std::size_t es = core::dtype_size(dtype);
  const int n = impl_->size, r = impl_->rank;
  Fingerprint fp{OpKind::all_gather, dtype, ReduceOp::sum, 0, -1, send_count, 0};
  if (DeviceSpace* flags = space != nullptr ? space->device_flags() : nullptr) {
    return impl_->issue_on_device(OpKind::all_gather, fp, *flags,
                                  [=](DeviceIssue& d, const DeviceGroup& g) {
                                    device_all_gather(d, g, send, recv, send_count, dtype);
                                  });
  }
  // Bruck's and recursive doubling carry the fingerprint in their own messages; the ring checks
  // it through channel 0's exchange with the neighbours.
  const Algorithm algorithm = all_gather_algorithm(space);
  return impl_->submit(
      OpKind::all_gather, true, fp, 0,
      [=](ChannelContext& ctx) {
        // Bruck's and recursive doubling on device buffers run in the space's pinned staging,
        // copied back whole: host algorithms, for the latency-bound sizes they are for.
        const std::size_t block = send_count * es, bytes = block * n;
        const bool staged = space != nullptr && algorithm != Algorithm::ring;
        char* out = staged ? space->staging(0, bytes) : static_cast<char*>(recv);
        copy_within(ctx, out + r * block, send, block);
        if (algorithm == Algorithm::bruck) {
          bruck_all_gather(ctx, out, send_count, dtype);
        } else if (algorithm == Algorithm::doubling) {
          doubling_all_gather(ctx, out, send_count, dtype);
        } else {
          ring_all_gather_blocks(ctx, out, send_count, dtype);
        }
        if (staged) copy_within(ctx, recv, out, bytes);
      },
      {}, !checks_fingerprint_apart(algorithm), space,
      FlightOp::with_algorithm(algorithm_name(algorithm)));
}

WorkPtr Communicator::broadcast(void* data, std::size_t count, DType dtype, int root,
                                BufferSpace* space) {
  impl_->check_dtype(dtype, "broadcast");
  impl_->check_rank(root, "root", "broadcast");
  impl_->check_buffer(data, count, "buffer", "broadcast");
  Fingerprint fp{OpKind::broadcast, dtype, ReduceOp::sum, 0, root, count, 0};
  if (DeviceSpace* flags = space != nullptr ? space->device_flags() : nullptr) {
    return impl_->issue_on_device(OpKind::broadcast, fp, *flags,
                                  [=](DeviceIssue& d, const DeviceGroup& g) {
                                    device_broadcast(d, g, data, count, dtype, root);
                                  });
  }
  return impl_->submit(
      OpKind::broadcast, true, fp, 0,
      [=](ChannelContext& ctx) {
        chain_broadcast(ctx, static_cast<char*>(data), count, dtype, root);
      },
      {}, false, space);
}

WorkPtr Communicator::reduce(const void* send, void* recv, std::size_t count, DType dtype,
                             ReduceOp op, int root, BufferSpace* space) {
  impl_->check_dtype(dtype, "reduce");
  impl_->check_reduce_op(dtype, op, "reduce");
  impl_->check_rank(root, "root", "reduce");
  impl_->check_buffer(send, count, "send buffer", "reduce");
  if (impl_->rank == root) impl_->check_buffer(recv, count, "recv buffer on the root", "reduce");
  const std::size_t es = core::dtype_size(dtype);
  const bool is_root = impl_->rank == root;
  Fingerprint fp{OpKind::reduce, dtype, op, 0, root, count, 0};
  if (DeviceSpace* flags = space != nullptr ? space->device_flags() : nullptr) {
    return impl_->issue_on_device(OpKind::reduce, fp, *flags,
                                  [=](DeviceIssue& d, const DeviceGroup& g) {
                                    device_reduce(d, g, send, recv, count, dtype, op, root);
                                  });
  }
  return impl_->submit(
      OpKind::reduce, true, fp, 0,
      [=](ChannelContext& ctx) {
        // The root reduces into recv; the others into a working copy of their input.
        std::vector<char> host;
        if (!is_root && space == nullptr) host.resize(count * es);
        char* data = is_root            ? static_cast<char*>(recv)
                     : space != nullptr ? space->scratch(count * es)
                                        : host.data();
        copy_within(ctx, data, send, count * es);
        chain_reduce(ctx, data, count, dtype, op, root);
        if (is_root) divide_for_avg(ctx, data, count, dtype, op);
      },
      {}, false, space);
}

WorkPtr Communicator::barrier() {
  Fingerprint fp{OpKind::barrier, DType::u8, ReduceOp::sum, 0, -1, 0, 0};
  return impl_->submit(OpKind::barrier, true, fp, 0,
                       [](ChannelContext& ctx) { dissemination_barrier(ctx); });
}

WorkPtr Communicator::send(const void* data, std::size_t count, DType dtype, int peer,
                           BufferSpace* space) {
  impl_->check_dtype(dtype, "send");
  impl_->check_rank(peer, "peer", "send");
  RINGLET_CHECK(peer != impl_->rank, ValueError, "send: rank ", peer, " cannot send to itself");
  impl_->check_buffer(data, count, "buffer", "send");
  const std::size_t bytes = count * core::dtype_size(dtype);
  if (space == nullptr) {
    return impl_->submit_p2p(OpKind::send, peer, bytes,
                             [=](transport::Connection& c) { return c.send(data, bytes); });
  }
  // Device buffer: copied out into pinned memory of its own (after the caller's stream), sent
  // from there; the memory lives until the send is done.
  auto pinned = space->host_buffer(bytes);
  return impl_->submit_p2p(
      OpKind::send, peer, bytes,
      [=](transport::Connection& c) {
        space->copy(pinned.get(), data, bytes);
        space->fence();
        return c.send(pinned.get(), bytes);
      },
      space, [pinned] {});
}

WorkPtr Communicator::recv(void* data, std::size_t count, DType dtype, int peer,
                           BufferSpace* space) {
  impl_->check_dtype(dtype, "recv");
  impl_->check_rank(peer, "peer", "recv");
  RINGLET_CHECK(peer != impl_->rank, ValueError, "recv: rank ", peer,
                " cannot receive from itself");
  impl_->check_buffer(data, count, "buffer", "recv");
  const std::size_t bytes = count * core::dtype_size(dtype);
  if (space == nullptr) {
    return impl_->submit_p2p(OpKind::recv, peer, bytes,
                             [=](transport::Connection& c) { return c.recv(data, bytes); });
  }
  // Device buffer: received into pinned memory, copied into place once complete.
  auto pinned = space->host_buffer(bytes);
  return impl_->submit_p2p(
      OpKind::recv, peer, bytes,
      [=](transport::Connection& c) { return c.recv(pinned.get(), bytes); }, space,
      [=] { space->copy_now(data, pinned.get(), bytes); });
}

void Communicator::abort(const std::string& reason) {
  impl_->failures.fail(core::str("rank ", impl_->rank, ": communicator aborted: ", reason),
                       core::str("rank ", impl_->rank, " aborted: ", reason));
}

bool Communicator::aborted() const { return impl_->failures.current() != nullptr; }

std::string Communicator::store_address() const { return impl_->store.address(); }

std::string Communicator::dump_flight_recorder(const std::string& reason) {
  return impl_->dump_flight_recorder(reason);
}

CommCounters Communicator::counters() const {
  CommCounters c;
  c.ops = impl_->ops.load();
  c.host_waits = impl_->host_waits.load();
  for (int ch = 0; ch < impl_->scheduler.channels(); ++ch) {
    for (int p = 0; p < impl_->size; ++p) {
      if (p != impl_->rank) c.host_messages += impl_->scheduler.mesh(ch).peer(p).messages_sent();
    }
  }
  return c;
}

Tracer& Communicator::tracer() { return impl_->tracer; }

}  // namespace ringlet::collectives
