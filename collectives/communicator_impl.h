// Communicator::Impl: the communicator's state (options, tracer, failure policy, peer access,
// windows, rings, scheduler, watchdog) and how an op is submitted and how a channel executes it.
// Private to collectives: communicator.cpp (the collectives on buffers, creation) and
// communicator_groups.cpp (the personalized collectives and sub-communicators) include it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <mutex>
#include <set>
#include <thread>

#include "collectives/algorithms.h"
#include "collectives/communicator.h"
#include "collectives/device_collectives.h"
#include "collectives/device_control.h"
#include "collectives/device_issue.h"
#include "collectives/device_space.h"
#include "collectives/device_watchdog.h"
#include "collectives/failure_policy.h"
#include "collectives/flight_recorder.h"
#include "collectives/peer_memory.h"
#include "collectives/reduce_kernels.h"
#include "collectives/scheduler.h"
#include "collectives/status_board.h"
#include "collectives/topology.h"
#include "collectives/work_driver.h"
#include "core/log.h"

namespace ringlet::collectives {

// The dtypes the collectives move and reduce (u8 too: reductions of bytes, and the byte view
// every other element type travels as where nothing is reduced).
inline bool supported(DType dtype) {
  return dtype == DType::f32 || dtype == DType::f64 || dtype == DType::f16 ||
         dtype == DType::bf16 || dtype == DType::i32 || dtype == DType::i64 || dtype == DType::u8;
}

struct Communicator::Impl {
  Impl(transport::Store& store_, const transport::MeshOptions& mesh, ResolvedOptions options_)
      : store(store_),
        rank(mesh.rank),
        size(mesh.world_size),
        options(std::move(options_)),
        tracer(options.trace_dir, mesh.rank),
        recorder(options.flight_recorder_size),
        failures(store_, options.name + "/error", mesh.rank,
                 [this](const std::string& reason) {
                   abort_connections(reason);
                   dump_flight_recorder(reason);
                 }),
        scheduler(mesh.rank, mesh.world_size,
                  [this](ChannelContext& ctx, Task& task) { execute(ctx, task); }) {}

  transport::Store& store;
  int rank, size;
  ResolvedOptions options;
  // As the caller gave them: what a sub-communicator is made with (new_group).
  transport::MeshOptions mesh_given;
  CommOptions options_given;
  std::uint64_t next_group = 0;  // new_group calls so far (guarded by mutex)
  Tracer tracer;
  FlightRecorder recorder;
  std::string transport_label;  // what the records name as the transport (set once connected)
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
  std::atomic<int> space_ops_queued{0};     // device ops on the progress thread, not yet run
  std::unique_ptr<StatusPublisher> status;  // stopped by ~Communicator, before the rest
  DeviceWatchdog watchdog{[this](const std::string& m, bool timed_out) {
                            const std::string said = timed_out ? m + failures.board_story() : m;
                            return failures.fail(said, said);
                          },
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

  // The flight recorder's side of an op (flight_recorder.h): its record at issue, and what a
  // failure left (the peer waited on, the bytes moved, whether a deadline passed).
  std::uint64_t record_issued(OpKind kind, bool collective, const Fingerprint& fp, FlightOp op) {
    if (!recorder.enabled()) return 0;
    op.kind = kind;
    op.collective = collective;
    op.seq = fp.seq;
    if (collective) {
      op.dtype = fp.dtype;
      op.count = fp.count;
      op.bytes = fp.count * core::dtype_size(fp.dtype);
      if (fp.root >= 0) op.peer = fp.root;
    }
    op.transport = transport_label.c_str();  // set once, before the first op
    return recorder.issued(op);
  }
  void record_failed(std::uint64_t id, const std::exception_ptr& error, const OpState& op) {
    if (id == 0) return;
    bool timed_out = false;
    std::string what = "unknown error";
    try {
      std::rethrow_exception(error);
    } catch (const core::TimeoutError& e) {
      timed_out = true;
      what = e.what();
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    recorder.failed(id, what, timed_out, op.waiting_on, op.bytes_done);
  }
  // Every rank's records, written where the options say (RINGLET_FR_DIR) when the communicator
  // first fails (its failure policy calls this), or on request; returns the file, or why none.
  std::string dump_flight_recorder(const std::string& reason) {
    if (!recorder.enabled()) return "the flight recorder is off (RINGLET_FR_SIZE=0)";
    if (options.flight_recorder_dir.empty()) return "no dump directory (RINGLET_FR_DIR)";
    const std::string path = flight_dump_path(options.flight_recorder_dir, rank, options.name);
    const std::string error = recorder.dump(path, rank, size, options.name, reason);
    if (!error.empty()) {
      core::log(core::LogLevel::warn, "rank ", rank, ": the flight recorder's dump to ", path,
                " failed: ", error);
      return error;
    }
    core::log(core::LogLevel::info, "rank ", rank, ": flight recorder dumped to ", path);
    return path;
  }

  // Publishes this rank's position on the store's status board (status_board.h) from a thread
  // and a store connection of its own; a store that cannot open another one (torch's, a file)
  // has no board. The board's reading is what a timed-out op's message adds.
  void start_status_board() {
    if (options.status_interval.count() == 0) return;
    std::unique_ptr<transport::Store> own = store.another_client(std::chrono::seconds(5));
    if (!own) return;
    RankStatus identity;
    identity.rank = rank;
    identity.world_size = size;
    status = std::make_unique<StatusPublisher>(
        std::move(own), options.name, identity, options.status_interval,
        [this](RankStatus& s) {
          s.set_position(recorder.position());
          if (auto f = failures.current()) s.failure = core::error_text(f);
        },
        [this] { dump_flight_recorder("requested through the status board (ringlet status)"); });
    // The board as the others published it, with this rank's own entry as of now.
    failures.set_board_reader([this] {
      auto board = read_status_board(store, options.name, size, std::chrono::milliseconds(200));
      board[static_cast<std::size_t>(rank)] = status->now();
      return assess_status(board, wall_now_ns(), options.timeout).story;
    });
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
      WorkDriver::fail(*task.work, f);
      return;
    }
    ctx.op.begin(task.kind, task.fingerprint, core::Deadline::after(options.timeout),
                 options.timeout);
    if (ctx.channel.channel == 0) recorder.started(task.record);
    try {
      if (task.collective && ctx.channel.channel == 0 && !task.self_checked) {
        post_fingerprint(ctx, task);
      } else if (task.gate && !task.gate->wait(ctx.op.deadline)) {
        WorkDriver::fail(*task.work,
                         failures.current());  // channel 0 failed: its error is the cause
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
      const FailurePolicy::OpFailure told = failures.describe(ctx.op, error);
      record_failed(task.record, error, ctx.op);  // after the board is read, before the dump
      WorkDriver::fail(*task.work, failures.fail(told.message, told.abort_reason));
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
      if (ctx.channel.channel == 0) recorder.completed(task.record);
      WorkDriver::part_done(*task.work);
      return;
    }
    auto work = task.work;
    auto check = std::move(ctx.op.deferred_check);
    ctx.op.deferred->then([this, work, check, id = task.record] {
      if (auto error = check()) {
        record_failed(id, error, {});
        WorkDriver::fail(*work, error);
      } else {
        recorder.completed(id);
        WorkDriver::part_done(*work);
      }
    });
    ctx.op.deferred = nullptr;
  }

  // Queues `run` on channel `channel` (or on every channel when channel < 0, with a shared
  // gate, as run_split(ctx, c)); a small collective may run on the calling thread instead.
  WorkPtr submit(OpKind kind, bool collective, Fingerprint fp, int channel,
                 std::function<void(ChannelContext&)> run_one,
                 std::function<void(ChannelContext&, int)> run_split = {},
                 bool self_checked = false, BufferSpace* space = nullptr, FlightOp record = {}) {
    {
      std::lock_guard lock(mutex);
      fp.seq = collective ? next_seq++ : next_p2p++;
    }
    ++ops;
    const int parts = channel < 0 ? scheduler.channels() : 1;
    auto work = std::make_shared<Work>(rank, op_kind_name(kind), fp.seq, parts, options.timeout);
    const std::uint64_t id = record_issued(kind, collective, fp, record);
    if (auto f = failures.current()) {
      recorder.failed(id, "the communicator had failed before", false, -1, 0);
      WorkDriver::fail(*work, f);
      return work;
    }
    auto gate = parts > 1 ? std::make_shared<Gate>() : nullptr;
    if (space != nullptr) run_one = on_space(space, std::move(run_one));
    Task task{std::move(run_one), work, kind, fp.seq, collective, self_checked, fp, gate, id};
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

  // A device collective with no host in the loop (device_collectives.h): its peers checked (one
  // that failed or exited fails it before any of its work is queued), its fingerprint checked
  // against theirs, its work queued on the device from this thread by `body`, and the watchdog
  // watching it from here until the device has run it. An op being captured into a graph is
  // done here: it runs when the graph does.
  WorkPtr issue_on_device(OpKind kind, Fingerprint fp, DeviceSpace& space,
                          const std::function<void(DeviceIssue&, const DeviceGroup&)>& body) {
    std::lock_guard issuing(device_issue);
    {
      std::lock_guard lock(mutex);
      fp.seq = next_seq++;
    }
    ++ops;
    auto work = std::make_shared<Work>(rank, op_kind_name(kind), fp.seq, 1, options.timeout);
    const std::uint64_t id =
        record_issued(kind, true, fp, FlightOp::with_algorithm("device flags"));
    if (auto f = failures.current()) {
      recorder.failed(id, "the communicator had failed before", false, -1, 0);
      WorkDriver::fail(*work, f);
      return work;
    }
    recorder.started(id);  // queued on the device from here, whole
    DeviceControl* control = space.device_control();
    const auto ticket =
        watchdog.watch(work, &space, core::Deadline::after(options.timeout), work->describe(),
                       [this, id](const std::string* failure, bool timed_out, int late_peer) {
                         if (failure == nullptr) {
                           recorder.completed(id);
                         } else {
                           recorder.failed(id, *failure, timed_out, late_peer, 0);
                         }
                       });
    bool queueing = false;
    try {
      if (control != nullptr) check_peers(*control, fp);
      after_queued_space_ops();
      queueing = true;
      std::unique_ptr<DeviceIssue> issue = space.issue_on_device();
      body(*issue, space.device_group());
      std::shared_ptr<DeviceCompletion> completion = issue->finish();
      WorkDriver::complete_on_device(*work, completion);
      if (completion->captured()) {
        ticket->withdraw();
        recorder.completed(id);  // recorded into the graph: it runs with each replay
        return work;
      }
      ticket->queued(std::move(completion));
    } catch (const std::exception& e) {
      ticket->withdraw();
      // The communicator fails, and the peers learn it. Some of the op may be queued: its flags
      // are released (those of ops queued before it, the watchdog releases).
      const std::string message = core::str(work->describe(), ": ", e.what());
      recorder.failed(id, e.what(), false, -1, 0);
      WorkDriver::fail(*work, failures.fail(message, message));
      if (control != nullptr) control->set_failed(message);
      if (queueing) space.release_flags(message);
    }
    return work;
  }

  // Before a device op queues anything: a peer that failed or exited fails it here, where the
  // driver cannot hold this thread on work that waits for that peer.
  void check_peers(DeviceControl& control, const Fingerprint& fp) {
    const std::string trouble = control.peer_trouble();
    if (!trouble.empty()) throw core::PeerError(trouble);
    check_fingerprint(control, fp);
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
        {}, false, space, FlightOp::point_to_point(bytes, peer));
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
                  " is not supported (f32 f64 f16 bf16 i32 i64 u8)");
  }
  // The bitwise reductions are for integers: refused at issue, before anything is sent.
  void check_reduce_op(DType dtype, ReduceOp op, const char* name) const {
    const bool bitwise = op == ReduceOp::band || op == ReduceOp::bor || op == ReduceOp::bxor;
    RINGLET_CHECK(!bitwise || !core::is_floating(dtype), DTypeError, name, ": ", reduce_op_name(op),
                  " is for the integer dtypes (i32 i64 u8), not ", dtype);
  }
  void check_rank(int r, const char* what, const char* op) const {
    RINGLET_CHECK(r >= 0 && r < size, ValueError, op, ": ", what, " ", r,
                  " is outside the communicator of size ", size);
  }
};

}  // namespace ringlet::collectives
