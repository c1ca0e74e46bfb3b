// Communicator: validation at issue time, the op's fingerprint and algorithm, and how a channel
// runs one op (execute). The jobs around it live in their own files: options.cpp (settings,
// once), peer_memory.cpp (what ranks can do with each other's memory), scheduler.cpp (channels,
// threads, issue order, inline runs), failure_policy.cpp (first failure wins, published,
// connections aborted), algorithm_choice.cpp (which all-reduce algorithm).
#include "collectives/communicator.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <mutex>
#include <set>
#include <thread>

#include "collectives/algorithms.h"
#include "collectives/device_control.h"
#include "collectives/device_watchdog.h"
#include "collectives/failure_policy.h"
#include "collectives/peer_memory.h"
#include "collectives/reduce_kernels.h"
#include "collectives/scheduler.h"
#include "collectives/topology.h"
#include "core/log.h"

namespace ringlet::collectives {
namespace {

bool supported(DType dtype) {
  return dtype == DType::f32 || dtype == DType::f64 || dtype == DType::f16 ||
         dtype == DType::bf16 || dtype == DType::i32 || dtype == DType::i64;
}

}  // namespace

struct Communicator::Impl {
  Impl(transport::Store& store_, const transport::MeshOptions& mesh, ResolvedOptions options_)
      : store(store_),
        rank(mesh.rank),
        size(mesh.world_size),
        options(std::move(options_)),
        tracer(options.trace_dir, mesh.rank),
        failures(store_, options.name + "/error", mesh.rank,
                 [this](const std::string& reason) { abort_connections(reason); }),
        scheduler(mesh.rank, mesh.world_size,
                  [this](ChannelContext& ctx, Task& task) { execute(ctx, task); }) {}

  transport::Store& store;
  int rank, size;
  ResolvedOptions options;
  Tracer tracer;
  FailurePolicy failures;
  PeerAccess access;
  SharedWindows windows;  // this rank's shared window and its peers', when access.windows
  Windows host_windows;   // the same, as the window algorithm reads them
  HostRings host_rings;   // the hierarchical all-reduce's rings (when access.hosts)
  std::mutex mutex;       // guards the seq counters
  // One device op is queued at a time: its sequence number, fingerprint and device work
  // must reach the device in the same order on every thread that issues.
  std::mutex device_issue;
  std::uint64_t next_seq = 0, next_p2p = 0;
  // Set once the destructor stopped the channels: a send/recv still pending then fails while
  // its connection is destroyed, and must not reach for the channels being torn down.
  std::atomic<bool> stopped{false};
  std::atomic<std::uint64_t> ops{0}, host_waits{0};
  std::atomic<int> space_ops_queued{0};  // device ops on the progress thread, not yet run
  DeviceWatchdog watchdog{[this](const std::string& m) { return failures.fail(m, m); },
                          [this] { return failures.current(); }};
  Scheduler scheduler;  // last: its threads stop before the rest goes

  void connect_channels(const transport::MeshOptions& mesh, core::Deadline deadline) {
    for (int c = 0; c < options.channels; ++c) {
      transport::MeshOptions m = mesh;
      m.prefix = core::str(options.name, "/ch", c, "/", mesh.prefix);
      ChannelConfig& config = scheduler.add_channel(transport::Mesh::connect(store, m, deadline));
      config.tracer = &tracer;
      config.slice_bytes = options.slice_bytes;
    }
    host_rings.piece_bytes = options.piece_bytes;
  }

  // Agrees with every rank on cross-memory reads and shared windows (channel 0's), and checks
  // that an explicitly requested algorithm can run.
  void agree_on_peer_memory(const transport::MeshOptions& mesh, core::Deadline deadline) {
    bool mine = true;
    for (int c = 0; c < scheduler.channels(); ++c) {
      for (int p = 0; p < size; ++p) {
        if (p != rank) mine = mine && scheduler.mesh(c).peer(p).can_read_peer();
      }
    }
    access.peers_readable =
        size == 1 || all_ranks_agree(store, core::str(options.name, "/readable/", mesh.prefix, "/"),
                                     rank, size, mine, deadline);
    RINGLET_CHECK(access.peers_readable || options.algo != AlgoRequest::direct, ValueError,
                  "RINGLET_ALGO=direct needs every pair of ranks on one host with shm connections "
                  "that can read each other's memory (cross-memory attach; RINGLET_SHM_CMA=1)");
    if (access.peers_readable && size > 1 && options.window_bytes > 0) {
      windows = setup_shared_windows(store, core::str(options.name, "/window/", mesh.prefix, "/"),
                                     rank, size, options.window_bytes, deadline);
      access.windows = !windows.mapped.empty();
      host_windows = Windows{windows.mapped, windows.bytes};
    }
    RINGLET_CHECK(access.windows || size == 1 || options.algo != AlgoRequest::window, ValueError,
                  "RINGLET_ALGO=window needs every rank on one host with shm connections that can "
                  "map each other's windows (and RINGLET_SHM_WINDOW_BYTES > 0)");
  }

  // Groups the ranks by the host each published with its address (channel 0's mesh): where
  // there are several hosts with the same number (>= 2) of ranks on each, the hierarchical
  // all-reduce can run, and this rank's two rings are kept for it.
  void learn_topology() {
    std::vector<std::string> host_of(size);
    for (int p = 0; p < size; ++p) host_of[p] = scheduler.mesh(0).host_of(p);
    const Topology topology(host_of);
    access.hosts = topology.regular();
    if (access.hosts) {
      host_rings.local = topology.local_ranks(rank);
      host_rings.cross = topology.cross_ranks(rank);
    }
    RINGLET_CHECK(access.hosts || options.algo != AlgoRequest::hierarchical, ValueError,
                  "RINGLET_ALGO=hierarchical needs ranks on several hosts with the same number, at "
                  "least 2, on each; these ranks are on ",
                  topology.describe());
  }

  void abort_connections(const std::string& reason) {
    if (stopped) return;
    for (int c = 0; c < scheduler.channels(); ++c) {
      for (int p = 0; p < size; ++p) {
        if (p != rank) scheduler.mesh(c).peer(p).abort(reason);
      }
    }
  }

  // How a channel runs its part of an op: fail fast after a failure, check the fingerprint (or
  // wait for channel 0 to have checked it), run the algorithm, complete or fail the Work.
  void execute(ChannelContext& ctx, Task& task) {
    if (auto f = failures.current()) {
      if (task.gate) task.gate->open(false);
      task.work->fail(f);
      return;
    }
    ctx.op.begin(task.kind, task.fingerprint, core::Deadline::after(options.timeout),
                 options.timeout);
    try {
      if (task.collective && ctx.channel.channel == 0 && !task.self_checked) {
        post_fingerprint(ctx, task);
      } else if (task.gate && !task.gate->wait(ctx.op.deadline)) {
        task.work->fail(failures.current());  // channel 0 failed: its error is the cause
        return;
      }
      task.run(ctx);
      ctx.op.fingerprint.settle(ctx.op.deadline, &ctx.op.waiting_on);  // if nothing waited
      complete(ctx, task);
    } catch (...) {
      std::exception_ptr error = std::current_exception();
      // The transport may have failed on the data of a mismatched op before the check.
      if (auto mismatch = ctx.op.fingerprint.abandon()) error = mismatch;
      if (task.gate) task.gate->open(false);
      task.work->fail(failures.op_failed(ctx.op, error));
    }
  }

  void post_fingerprint(const ChannelContext& ctx, const Task& task) {
    auto gate = task.gate;
    if (size == 1) {
      if (gate) gate->open(true);
      return;
    }
    ctx.op.fingerprint.post(ctx.peer(ctx.left()), ctx.peer(ctx.right()), task.fingerprint, rank,
                            ctx.left(), ctx.right(), [gate] {
                              if (gate) gate->open(true);
                            });
  }

  // Completes this channel's part, or, for an op that completes asynchronously (send/recv),
  // arranges for its transport request to complete it.
  void complete(const ChannelContext& ctx, Task& task) {
    if (!ctx.op.deferred) {
      task.work->part_done();
      return;
    }
    auto work = task.work;
    auto check = std::move(ctx.op.deferred_check);
    ctx.op.deferred->then([work, check] {
      if (auto error = check()) {
        work->fail(error);
      } else {
        work->part_done();
      }
    });
    ctx.op.deferred = nullptr;
  }

  // Queues `run` on channel `channel` (or on every channel when channel < 0, with a shared
  // gate, as run_split(ctx, c)); a small collective may run on the calling thread instead.
  WorkPtr submit(OpKind kind, bool collective, Fingerprint fp, int channel,
                 std::function<void(ChannelContext&)> run_one,
                 std::function<void(ChannelContext&, int)> run_split = {},
                 bool self_checked = false, BufferSpace* space = nullptr) {
    {
      std::lock_guard lock(mutex);
      fp.seq = collective ? next_seq++ : next_p2p++;
    }
    ++ops;
    const int parts = channel < 0 ? scheduler.channels() : 1;
    auto work = std::make_shared<Work>(rank, op_kind_name(kind), fp.seq, parts);
    if (auto f = failures.current()) {
      work->fail(f);
      return work;
    }
    auto gate = parts > 1 ? std::make_shared<Gate>() : nullptr;
    if (space != nullptr) run_one = on_space(space, std::move(run_one));
    Task task{std::move(run_one), work, kind, fp.seq, collective, self_checked, fp, gate};
    // Device ops never run on the caller's thread: it would wait for the device.
    if (parts == 1 && collective && space == nullptr && fits_inline(fp) &&
        scheduler.run_inline(channel, task)) {
      return work;
    }
    if (parts == 1) {
      scheduler.enqueue(channel, std::move(task));
      return work;
    }
    for (int c = 0; c < parts; ++c) {
      Task part = task;
      part.run = [run_split, c](ChannelContext& ctx) { run_split(ctx, c); };
      scheduler.enqueue(c, std::move(part));
    }
    return work;
  }

  // A device op's body, as the progress thread runs it: after the caller's stream's work so
  // far (the event order_after_caller recorded at issue), with the space, and with its device
  // work done before the Work completes. Its fences are the op's host waits.
  std::function<void(ChannelContext&)> on_space(BufferSpace* space,
                                                std::function<void(ChannelContext&)> body) {
    std::function<void()> after_caller = space->order_after_caller();
    ++space_ops_queued;
    return [this, space, after_caller = std::move(after_caller),
            body = std::move(body)](ChannelContext& ctx) {
      const std::uint64_t before = host_waits_here();
      struct Done {
        Impl* impl;
        std::uint64_t before;
        ~Done() {
          impl->host_waits += host_waits_here() - before;
          --impl->space_ops_queued;
        }
      } done{this, before};
      ctx.op.space = space;
      after_caller();
      body(ctx);
      space->fence();
    };
  }

  // A device collective with no host in the loop (device_collectives.h): its fingerprint checked
  // against the peers' records, its work queued on the device from this thread by `body`, and
  // the watchdog watching it until the device has run it. An op being captured into a graph is
  // done here: it runs when the graph does.
  WorkPtr issue_on_device(OpKind kind, Fingerprint fp, BufferSpace& space,
                          const std::function<void(DeviceIssue&, const DeviceGroup&)>& body) {
    std::lock_guard issuing(device_issue);
    {
      std::lock_guard lock(mutex);
      fp.seq = next_seq++;
    }
    ++ops;
    auto work = std::make_shared<Work>(rank, op_kind_name(kind), fp.seq);
    if (auto f = failures.current()) {
      work->fail(f);
      return work;
    }
    DeviceControl* control = space.device_control();
    try {
      if (control != nullptr) check_fingerprint(*control, fp);
      after_queued_space_ops();
      std::unique_ptr<DeviceIssue> issue = space.issue_on_device();
      body(*issue, *space.device_group());
      std::shared_ptr<DeviceCompletion> completion = issue->finish();
      work->complete_on_device(completion);
      if (completion->captured()) return work;  // done: it runs with the graph
      watchdog.watch(work, std::move(completion), &space, core::Deadline::after(options.timeout),
                     work->describe());
    } catch (const std::exception& e) {
      // Some of the op may be queued: the communicator fails, and the peers learn it.
      const std::string message = core::str(work->describe(), ": ", e.what());
      work->fail(failures.fail(message, message));
      if (control != nullptr) control->set_failed(message);
      space.release_flags(message);
    }
    return work;
  }

  void check_fingerprint(DeviceControl& control, const Fingerprint& fp) {
    control.publish(fp);
    if (auto bad = control.mismatch(fp)) {
      throw mismatch_error(rank, fp, bad->first, &bad->second);
    }
  }

  // Device ops still queued on the progress thread (sends, receives) run first: they may read
  // or write what this op does. A host wait, and only then.
  void after_queued_space_ops() {
    if (space_ops_queued.load() == 0) return;
    ++host_waits;
    const auto deadline = core::Deadline::after(options.timeout);
    while (space_ops_queued.load() > 0) {
      RINGLET_CHECK(!deadline.expired(), TimeoutError, "rank ", rank,
                    ": device ops queued before this one did not finish in time");
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  bool fits_inline(const Fingerprint& fp) const {
    std::size_t volume = fp.count * core::dtype_size(fp.dtype);
    if (fp.op == OpKind::all_gather || fp.op == OpKind::reduce_scatter) volume *= size;
    return options.inline_bytes > 0 && volume <= options.inline_bytes;
  }

  // send/recv: posted in issue order by channel 0's progress thread (so they interleave with
  // collectives identically on both sides) but not waited there: the Work completes when the
  // transport request does, so a recv posted before a send cannot block the send.
  // `then` (device buffers) runs once the request succeeded, before the Work completes.
  WorkPtr submit_p2p(OpKind kind, int peer, std::size_t bytes,
                     std::function<transport::RequestPtr(transport::Connection&)> post,
                     BufferSpace* space = nullptr, std::function<void()> then = {}) {
    return submit(
        kind, false, {}, 0,
        [this, kind, peer, bytes, post, then](ChannelContext& ctx) {
          transport::RequestPtr request = post(ctx.peer(peer));
          ctx.op.deferred = request;
          ctx.op.deferred_check = [this, request, peer, bytes, kind, seq = ctx.op.seq, then] {
            auto error = p2p_error(request, kind, seq, peer, bytes);
            if (!error && then) then();
            return error;
          };
        },
        {}, false, space);
  }

  // The error of a finished send/recv (it fails the communicator), or null.
  std::exception_ptr p2p_error(const transport::RequestPtr& request, OpKind kind, std::uint64_t seq,
                               int peer, std::size_t bytes) {
    std::string problem;
    if (request->failed()) {
      try {
        request->wait(core::Deadline::never());
      } catch (const std::exception& e) {
        problem = e.what();
      }
    } else if (kind == OpKind::recv && request->bytes() != bytes) {
      problem = core::str("expected ", bytes, " bytes, got a message of ", request->bytes());
    }
    if (problem.empty()) return nullptr;
    const std::string message =
        core::str("rank ", rank, ": ", op_kind_name(kind), " seq ", seq, " with rank ", peer,
                  " failed after ", request->bytes(), " bytes: ", problem);
    return failures.fail(message, message);
  }

  void check_buffer(const void* p, std::size_t count, const char* what, const char* op) const {
    RINGLET_CHECK(p != nullptr || count == 0, ValueError, op, ": ", what,
                  " is null for a count of ", count);
  }
  void check_dtype(DType dtype, const char* op) const {
    RINGLET_CHECK(supported(dtype), DTypeError, op, ": dtype ", dtype,
                  " is not supported (f32 f64 f16 bf16 i32 i64)");
  }
  void check_rank(int r, const char* what, const char* op) const {
    RINGLET_CHECK(r >= 0 && r < size, ValueError, op, ": ", what, " ", r,
                  " is outside the communicator of size ", size);
  }
};

std::unique_ptr<Communicator> Communicator::create(transport::Store& store,
                                                   const transport::MeshOptions& mesh,
                                                   CommOptions options, core::Deadline deadline) {
  auto impl = std::make_unique<Impl>(store, mesh, resolve_options(options, mesh.world_size));
  impl->connect_channels(mesh, deadline);
  impl->agree_on_peer_memory(mesh, deadline);
  impl->learn_topology();
  impl->scheduler.start();
  return std::unique_ptr<Communicator>(new Communicator(std::move(impl)));
}

Communicator::Communicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Communicator::~Communicator() {
  impl_->scheduler.stop();
  impl_->stopped = true;
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
  access.device_flags = space != nullptr && space->device_sync();
  if (access.device_flags && space->device_group() != nullptr && impl_->size > 1) {
    access.device_area_bytes = space->device_group()->area_bytes();
  }
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
      RINGLET_THROW(Error, "rank ", ctx.rank, ": ", algorithm_name(plan.algorithm),
                    " runs on the device, not on a channel");
  }
  divide_for_avg(ctx, data, count, dtype, op);
}

}  // namespace

WorkPtr Communicator::all_reduce(const void* send, void* recv, std::size_t count, DType dtype,
                                 ReduceOp op, BufferSpace* space) {
  impl_->check_dtype(dtype, "all_reduce");
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
  if (space != nullptr && space->device_sync()) {
    const auto algorithm = plan.algorithm == Algorithm::one_shot ? DeviceAlgorithm::one_shot
                                                                 : DeviceAlgorithm::two_shot;
    return impl_->issue_on_device(
        OpKind::all_reduce, fp, *space, [=](DeviceIssue& d, const DeviceGroup& g) {
          device_all_reduce(d, g, algorithm, send, recv, count, dtype, op);
        });
  }
  // The rings check the fingerprint through channel 0's exchange with the neighbours; the
  // others carry it in their own messages. Only host rings split over channels.
  const bool rings = plan.algorithm == Algorithm::ring || plan.algorithm == Algorithm::hierarchical;
  const int channels = impl_->scheduler.channels();
  if (!rings || channels == 1 || space != nullptr) {
    return impl_->submit(
        OpKind::all_reduce, true, fp, 0,
        [=](ChannelContext& ctx) { run_all_reduce(ctx, plan, in, out, count, dtype, op); }, {},
        !rings, space);
  }
  return impl_->submit(OpKind::all_reduce, true, fp, -1, {}, [=](ChannelContext& ctx, int c) {
    const std::size_t begin = split_offset(count, channels, c);
    const std::size_t end = split_offset(count, channels, c + 1);
    run_all_reduce(ctx, plan, in + begin * es, out + begin * es, end - begin, dtype, op);
  });
}

WorkPtr Communicator::reduce_scatter(const void* send, void* recv, std::size_t recv_count,
                                     DType dtype, ReduceOp op, BufferSpace* space) {
  impl_->check_dtype(dtype, "reduce_scatter");
  impl_->check_buffer(send, recv_count, "send buffer", "reduce_scatter");
  impl_->check_buffer(recv, recv_count, "recv buffer", "reduce_scatter");
  const std::size_t es = core::dtype_size(dtype);
  const int n = impl_->size, r = impl_->rank;
  Fingerprint fp{OpKind::reduce_scatter, dtype, op, 0, -1, recv_count, 0};
  if (space != nullptr && space->device_sync()) {
    return impl_->issue_on_device(OpKind::reduce_scatter, fp, *space,
                                  [=](DeviceIssue& d, const DeviceGroup& g) {
                                    device_reduce_scatter(d, g, send, recv, recv_count, dtype, op);
                                  });
  }
  return impl_->submit(
      OpKind::reduce_scatter, true, fp, 0,
      [=](ChannelContext& ctx) {
        // A working copy of the input (host memory, or the device space's scratch).
        const std::size_t bytes = recv_count * n * es;
        std::vector<char> host;
        if (space == nullptr) host.resize(bytes);
        char* work = space != nullptr ? space->scratch(bytes) : host.data();
        copy_within(ctx, work, send, bytes);
        ring_reduce_scatter_blocks(ctx, work, recv_count, dtype, op);
        char* mine = work + r * recv_count * es;
        divide_for_avg(ctx, mine, recv_count, dtype, op);
        copy_within(ctx, recv, mine, recv_count * es);
      },
      {}, false, space);
}

WorkPtr Communicator::all_gather(const void* send, void* recv, std::size_t send_count, DType dtype,
                                 BufferSpace* space) {
  impl_->check_dtype(dtype, "all_gather");
  impl_->check_buffer(send, send_count, "send buffer", "all_gather");
  impl_->check_buffer(recv, send_count, "recv buffer", "all_gather");
  const std::size_t es = core::dtype_size(dtype);
  const int r = impl_->rank;
  Fingerprint fp{OpKind::all_gather, dtype, ReduceOp::sum, 0, -1, send_count, 0};
  if (space != nullptr && space->device_sync()) {
    return impl_->issue_on_device(OpKind::all_gather, fp, *space,
                                  [=](DeviceIssue& d, const DeviceGroup& g) {
                                    device_all_gather(d, g, send, recv, send_count, dtype);
                                  });
  }
  return impl_->submit(
      OpKind::all_gather, true, fp, 0,
      [=](ChannelContext& ctx) {
        char* mine = static_cast<char*>(recv) + r * send_count * es;
        copy_within(ctx, mine, send, send_count * es);
        ring_all_gather_blocks(ctx, static_cast<char*>(recv), send_count, dtype);
      },
      {}, false, space);
}

WorkPtr Communicator::broadcast(void* data, std::size_t count, DType dtype, int root,
                                BufferSpace* space) {
  impl_->check_dtype(dtype, "broadcast");
  impl_->check_rank(root, "root", "broadcast");
  impl_->check_buffer(data, count, "buffer", "broadcast");
  Fingerprint fp{OpKind::broadcast, dtype, ReduceOp::sum, 0, root, count, 0};
  if (space != nullptr && space->device_sync()) {
    return impl_->issue_on_device(OpKind::broadcast, fp, *space,
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
  impl_->check_rank(root, "root", "reduce");
  impl_->check_buffer(send, count, "send buffer", "reduce");
  if (impl_->rank == root) impl_->check_buffer(recv, count, "recv buffer on the root", "reduce");
  const std::size_t es = core::dtype_size(dtype);
  const bool is_root = impl_->rank == root;
  Fingerprint fp{OpKind::reduce, dtype, op, 0, root, count, 0};
  if (space != nullptr && space->device_sync()) {
    return impl_->issue_on_device(OpKind::reduce, fp, *space,
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
