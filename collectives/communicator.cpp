// Communicator: validation at issue time, one progress thread per channel (each with its own
// Mesh), ops in issue order, the fingerprint check, and failure handling: the first error is
// published in the store (compare_set, first writer wins), every connection is aborted so the
// other ranks stop waiting at once, and every later op fails fast with the same cause.
#include "collectives/communicator.h"

#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "collectives/algorithms.h"
#include "collectives/reduce_kernels.h"
#include "core/env.h"
#include "core/log.h"
#include "transport/shm/window.h"

namespace ringlet::collectives {
namespace {

constexpr std::chrono::minutes kDefaultTimeout{10};
constexpr std::size_t kDefaultRdMaxBytes = 64 * 1024;
constexpr std::size_t kDefaultDirectMinBytes = 1024 * 1024;
// Measured with all_reduce_perf over shm, 2 and 4 ranks on 2 cores. Windows: a piece (half a
// window) is one chunk per rank, and chunks of 256 KiB (in every core's 1 MiB L2 through stage,
// reduce and gather) beat larger ones: 16 MiB at 2 ranks took 2.2 ms with 1 MiB windows, 2.6
// with 2 MiB, 2.8 with 4 MiB; at 4 ranks 2 MiB windows beat 4 MiB ones. Windows beat recursive
// doubling from 32 KiB (at 2 ranks from 16 KiB; at 4 ranks rd wins up to 16 KiB), and the
// ring and cross-memory attach at every larger size.
constexpr std::int64_t kDefaultWindowChunkBytes = 256 * 1024;
constexpr std::size_t kDefaultWindowMinBytes = 32 * 1024;
constexpr std::int64_t kDefaultInlineBytes = 64 * 1024;
// How long a rank that only saw a connection fail waits for another rank's published cause:
// long enough for a loaded machine to schedule the rank that found it, short next to any
// deadline (a crashed peer never publishes, so this is the delay its error costs).
constexpr std::chrono::milliseconds kRootCauseGrace{2000};

// Channels > 0 start a collective only after channel 0 checked the fingerprint.
struct Gate {
  std::mutex mutex;
  std::condition_variable cv;
  int state = 0;  // 0 pending, 1 ok, -1 failed
  void set(int s) {
    {
      std::lock_guard lock(mutex);
      state = s;
    }
    cv.notify_all();
  }
  bool wait(core::Deadline deadline) {
    std::unique_lock lock(mutex);
    core::wait_until(cv, lock, deadline, [this] { return state != 0; });
    return state == 1;
  }
};

struct Task {
  std::function<void(ChannelContext&)> run;
  WorkPtr work;
  const char* op_name;
  std::uint64_t seq;
  bool collective;             // carries a fingerprint
  bool self_checked;           // its algorithm sends the fingerprint with its own messages
  Fingerprint fingerprint;     // checked by channel 0
  std::shared_ptr<Gate> gate;  // null for single-channel ops
};

struct Channel {
  ChannelContext ctx;
  std::unique_ptr<transport::Mesh> mesh;
  std::thread thread;
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<Task> queue;
  bool busy = false;            // the progress thread is executing an op
  bool running_inline = false;  // a caller thread is executing an op of this channel
  bool stopping = false;
};

bool supported(DType dtype) {
  return dtype == DType::f32 || dtype == DType::f64 || dtype == DType::f16 ||
         dtype == DType::bf16 || dtype == DType::i32 || dtype == DType::i64;
}

}  // namespace

struct Communicator::Impl {
  transport::Store* store = nullptr;
  int rank = 0, size = 1;
  CommOptions options;
  std::unique_ptr<Tracer> tracer;
  std::vector<std::unique_ptr<Channel>> channels;
  std::mutex mutex;  // guards failure, seq counters
  std::exception_ptr failure;
  std::uint64_t next_seq = 0, next_p2p = 0;
  bool peers_readable = false;  // every rank can read every other rank's memory (direct)
  std::vector<transport::SharedWindow> windows;  // this rank's and its peers' (channel 0)

  std::exception_ptr current_failure() {
    std::lock_guard lock(mutex);
    return failure;
  }

  void channel_loop(Channel& ch) {
    while (true) {
      Task task;
      {
        std::unique_lock lock(ch.mutex);
        ch.cv.wait(lock, [&] { return !ch.running_inline && (ch.stopping || !ch.queue.empty()); });
        if (ch.queue.empty()) return;
        task = std::move(ch.queue.front());
        ch.queue.pop_front();
        ch.busy = true;
      }
      execute(ch, task);
      std::lock_guard lock(ch.mutex);
      ch.busy = false;
    }
  }

  void execute(Channel& ch, Task& task) {
    if (auto f = current_failure()) {
      if (task.gate) task.gate->set(-1);
      task.work->fail(f);
      return;
    }
    ChannelContext& ctx = ch.ctx;
    ctx.op_name = task.op_name;
    ctx.seq = task.seq;
    ctx.deadline = core::Deadline::after(options.timeout);
    ctx.waiting_on = -1;
    ctx.bytes_done = 0;
    ctx.op_fingerprint = task.fingerprint;
    try {
      if (task.collective && ctx.channel == 0 && !task.self_checked) {
        post_fingerprint(ctx, task);
      } else if (task.gate && !task.gate->wait(ctx.deadline)) {
        task.work->fail(current_failure());  // channel 0 failed: its error is the cause
        return;
      }
      ctx.deferred = nullptr;
      task.run(ctx);
      ctx.settle_fingerprint();  // for algorithms that had nothing to wait for
      if (ctx.deferred) {        // completes when its transport request does
        auto work = task.work;
        auto check = std::move(ctx.deferred_check);
        ctx.deferred->then([work, check] {
          if (auto error = check()) {
            work->fail(error);
          } else {
            work->part_done();
          }
        });
        ctx.deferred = nullptr;
        return;
      }
      task.work->part_done();
    } catch (...) {
      std::exception_ptr error = std::current_exception();
      if (ctx.fingerprint.active) {
        // the transport may have failed on the data of a mismatched op before the check
        if (auto mismatch = ctx.fingerprint_mismatch()) error = mismatch;
        ctx.fingerprint.active = false;
      }
      if (task.gate) task.gate->set(-1);
      task.work->fail(handle_failure(ctx, error));
    }
  }

  void post_fingerprint(ChannelContext& ctx, const Task& task) {
    auto gate = task.gate;
    if (size == 1) {
      if (gate) gate->set(1);
      return;
    }
    PendingFingerprint& f = ctx.fingerprint;
    f.active = true;
    f.mine = task.fingerprint;
    f.recv = ctx.peer(ctx.left()).recv(f.inbox.data(), f.inbox.size());
    f.send = ctx.peer(ctx.right()).send(&f.mine, sizeof f.mine);
    f.on_match = [gate] {
      if (gate) gate->set(1);
    };
  }

  // Turns an algorithm's exception into the op's error, publishes it, aborts everything.
  std::exception_ptr handle_failure(const ChannelContext& ctx, std::exception_ptr error) {
    std::string cause;
    bool timed_out = false, peer_failed = false;
    try {
      std::rethrow_exception(error);
    } catch (const core::TimeoutError& e) {
      timed_out = true;
      cause = e.what();
    } catch (const core::PeerError& e) {
      peer_failed = true;
      cause = e.what();
    } catch (const std::exception& e) {
      cause = e.what();
    }
    const std::string local = core::str(
        "rank ", rank, ": ", ctx.op_name, " seq ", ctx.seq, " failed",
        ctx.waiting_on >= 0 ? core::str(" waiting for rank ", ctx.waiting_on) : std::string(),
        " after ", ctx.bytes_done, " bytes", timed_out ? " (deadline passed)" : "", ": ", cause);
    std::string root = local;
    const std::string key = options.name + "/error";
    try {  // first writer wins: the root cause, for ranks that only saw a neighbour hang up
      if (peer_failed) {
        // A connection that failed may be the echo of a cause another rank is publishing right
        // now (a neighbour's transport closes on a protocol violation before that neighbour
        // has checked the fingerprint): give it a moment to appear.
        try {
          root = store->get(key, core::Deadline::after(kRootCauseGrace));
        } catch (const core::TimeoutError&) {
        }
      }
      if (root == local) root = store->compare_set(key, "", local);
    } catch (const std::exception& e) {
      core::log(core::LogLevel::warn, "rank ", rank, ": could not publish the error: ", e.what());
    }
    const std::string message = root == local ? local : core::str(local, "\n  root cause: ", root);
    return fail_communicator(message, "rank " + std::to_string(rank) + " aborted: " + local);
  }

  void abort_connections(const std::string& reason) {
    for (auto& ch : channels) {
      for (int p = 0; p < size; ++p) {
        if (p != rank) ch->mesh->peer(p).abort(reason);
      }
    }
  }

  // Executes `task` on this thread if channel `ch` is idle (nothing queued, nothing running);
  // the progress thread holds back meanwhile. Returns false (task untouched) otherwise.
  bool run_inline(Channel& ch, Task& task) {
    {
      std::lock_guard lock(ch.mutex);
      if (!ch.queue.empty() || ch.busy || ch.running_inline) return false;
      ch.running_inline = true;
    }
    execute(ch, task);
    bool queued;
    {
      std::lock_guard lock(ch.mutex);
      ch.running_inline = false;
      queued = !ch.queue.empty();
    }
    if (queued) ch.cv.notify_all();  // ops issued meanwhile by other threads
    return true;
  }

  // Queues `run` on channel `c` (or on every channel when c < 0, with a shared gate); a small
  // collective may run on the calling thread instead (run_inline).
  WorkPtr submit(const char* op_name, bool collective, Fingerprint fp, int channel,
                 std::function<void(ChannelContext&)> run_one,
                 std::function<void(ChannelContext&, int)> run_split = {},
                 bool self_checked = false) {
    std::uint64_t seq;
    {
      std::lock_guard lock(mutex);
      seq = collective ? next_seq++ : next_p2p++;
    }
    fp.seq = seq;
    std::size_t volume = fp.count * core::dtype_size(fp.dtype);
    if (fp.op == OpKind::all_gather || fp.op == OpKind::reduce_scatter) volume *= size;
    const bool small =
        options.inline_bytes > 0 && volume <= static_cast<std::size_t>(options.inline_bytes);
    const int parts = channel < 0 ? static_cast<int>(channels.size()) : 1;
    auto work =
        std::make_shared<Work>(core::str("rank ", rank, ": ", op_name, " seq ", seq), parts);
    if (auto f = current_failure()) {
      work->fail(f);
      return work;
    }
    auto gate = parts > 1 ? std::make_shared<Gate>() : nullptr;
    if (parts == 1 && collective && small) {
      Task task{std::move(run_one), work, op_name, seq, collective, self_checked, fp, gate};
      if (run_inline(*channels[channel], task)) return work;
      run_one = std::move(task.run);
    }
    for (int c = 0; c < parts; ++c) {
      Channel& ch = *channels[channel < 0 ? c : channel];
      std::function<void(ChannelContext&)> fn = run_one;
      if (channel < 0) fn = [run_split, c](ChannelContext& ctx) { run_split(ctx, c); };
      Task task{std::move(fn), work, op_name, seq, collective, self_checked, fp, gate};
      {
        std::lock_guard lock(ch.mutex);
        ch.queue.push_back(std::move(task));
      }
      ch.cv.notify_one();
    }
    return work;
  }

  // send/recv: posted in issue order by channel 0's progress thread (so they interleave with
  // collectives identically on both sides) but not waited there: the Work completes when the
  // transport request does, so a recv posted before a send cannot block the send.
  WorkPtr submit_p2p(const char* op_name, int peer, std::size_t bytes,
                     std::function<transport::RequestPtr(transport::Connection&)> post) {
    return submit(op_name, false, {}, 0, [this, op_name, peer, bytes, post](ChannelContext& ctx) {
      transport::RequestPtr request = post(ctx.peer(peer));
      ctx.deferred = request;
      ctx.deferred_check = [this, request, peer, bytes, op_name,
                            seq = ctx.seq]() -> std::exception_ptr {
        std::string problem;
        if (request->failed()) {
          try {
            request->wait(core::Deadline::never());
          } catch (const std::exception& e) {
            problem = e.what();
          }
        } else if (std::string(op_name) == "recv" && request->bytes() != bytes) {
          problem = core::str("expected ", bytes, " bytes, got a message of ", request->bytes());
        }
        if (problem.empty()) return nullptr;
        const std::string message =
            core::str("rank ", rank, ": ", op_name, " seq ", seq, " with rank ", peer,
                      " failed after ", request->bytes(), " bytes: ", problem);
        return fail_communicator(message, message);
      };
    });
  }

  // The first failure becomes the communicator's: it is recorded (every later op fails with
  // it) and every connection is aborted with `abort_reason`, so peers stop waiting at once.
  // Returns the communicator's failure (an earlier one if there was).
  std::exception_ptr fail_communicator(const std::string& message,
                                       const std::string& abort_reason) {
    bool first = false;
    {
      std::lock_guard lock(mutex);
      if (!failure) {
        failure = std::make_exception_ptr(CollectiveError(message));
        first = true;
      }
    }
    if (first) abort_connections(abort_reason);
    return current_failure();
  }

  void check_buffer(const void* p, std::size_t count, const char* what, const char* op) const {
    RINGLET_CHECK(p != nullptr || count == 0, ValueError, op, ": ", what,
                  " is null for a count of ", count);
  }
  void check_dtype(DType dtype, const char* op) const {
    RINGLET_CHECK(supported(dtype), DTypeError, op, ": dtype ", dtype,
                  " is not supported (f32 f64 f16 bf16 i32 i64)");
  }
  // Whether every rank's connections (all channels) can read their peers' memory: each rank
  // publishes its own answer and reads everyone's, so all ranks pick the same algorithms.
  bool agree_on_peer_reads(const transport::MeshOptions& mesh, core::Deadline deadline) {
    if (size == 1) return true;
    bool mine = true;
    for (const auto& ch : channels) {
      for (int p = 0; p < size; ++p) {
        if (p != rank) mine = mine && ch->mesh->peer(p).can_read_peer();
      }
    }
    const std::string key = core::str(options.name, "/readable/", mesh.prefix, "/");
    store->set(key + std::to_string(rank), mine ? "1" : "0");
    bool all = mine;
    for (int p = 0; p < size; ++p) {
      if (p != rank) all = store->get(key + std::to_string(p), deadline) == "1" && all;
    }
    return all;
  }

  // Gives channel 0 shared windows (window all-reduce) when every rank can map every other
  // rank's: each creates its own and publishes its address, maps its peers' and says whether
  // it could; all ranks read every answer, so all agree. A rank that cannot logs why.
  void setup_windows(const transport::MeshOptions& mesh, core::Deadline deadline) {
    const std::string key = core::str(options.name, "/window/", mesh.prefix, "/");
    ChannelContext& ctx = channels[0]->ctx;
    std::vector<std::byte*> mapped(static_cast<std::size_t>(size), nullptr);
    std::string problem;
    try {
      windows.push_back(
          transport::SharedWindow::create(static_cast<std::size_t>(options.window_bytes)));
      mapped[rank] = windows.back().data();
      store->set(key + "at/" + std::to_string(rank), windows.back().address());
    } catch (const std::exception& e) {
      problem = e.what();
      store->set(key + "at/" + std::to_string(rank), "");
    }
    for (int p = 0; p < size; ++p) {
      if (p == rank) continue;
      const std::string address = store->get(key + "at/" + std::to_string(p), deadline);
      if (!problem.empty()) continue;
      if (address.empty()) {
        problem = core::str("rank ", p, " has no window");
        continue;
      }
      try {
        windows.push_back(transport::SharedWindow::open(address));
        mapped[p] = windows.back().data();
      } catch (const std::exception& e) {
        problem = core::str("rank ", p, "'s: ", e.what());
      }
    }
    store->set(key + "ok/" + std::to_string(rank), problem.empty() ? "1" : "0");
    bool all = problem.empty();
    for (int p = 0; p < size; ++p) {
      if (p != rank) all = store->get(key + "ok/" + std::to_string(p), deadline) == "1" && all;
    }
    if (!windows.empty() && problem.empty()) windows.front().close_handle();  // all have mapped
    if (!problem.empty()) {
      core::log(core::LogLevel::info, "rank ", rank, ": no shared windows: ", problem);
    }
    if (!all) {
      windows.clear();
      return;
    }
    ctx.windows = std::move(mapped);
    ctx.window_bytes = static_cast<std::size_t>(options.window_bytes);
  }

  bool has_windows() const { return !channels.front()->ctx.windows.empty(); }

  void check_rank(int r, const char* what, const char* op) const {
    RINGLET_CHECK(r >= 0 && r < size, ValueError, op, ": ", what, " ", r,
                  " is outside the communicator of size ", size);
  }
};

std::unique_ptr<Communicator> Communicator::create(transport::Store& store,
                                                   const transport::MeshOptions& mesh,
                                                   CommOptions options, core::Deadline deadline) {
  auto impl = std::make_unique<Impl>();
  impl->store = &store;
  impl->rank = mesh.rank;
  impl->size = mesh.world_size;
  if (options.timeout.count() <= 0) {
    options.timeout = std::chrono::milliseconds(core::env_int(
        "RINGLET_TIMEOUT",
        std::chrono::duration_cast<std::chrono::milliseconds>(kDefaultTimeout).count(), 1,
        std::int64_t{1} << 40));
  }
  if (options.algo.empty()) options.algo = core::env_string("RINGLET_ALGO").value_or("auto");
  RINGLET_CHECK(options.algo == "auto" || options.algo == "ring" || options.algo == "rd" ||
                    options.algo == "direct" || options.algo == "window",
                ValueError, "RINGLET_ALGO='", options.algo,
                "' is not one of auto, ring, rd, direct, window");
  if (options.channels <= 0) {
    options.channels = static_cast<int>(core::env_int("RINGLET_CHANNELS", 1, 1, 16));
  }
  if (options.slice_bytes == 0) {  // 0 stays: each transport's preferred slice
    options.slice_bytes =
        static_cast<std::size_t>(core::env_int("RINGLET_SLICE_BYTES", 0, 1, std::int64_t{1} << 32));
  }
  if (options.rd_max_bytes == 0) options.rd_max_bytes = kDefaultRdMaxBytes;
  if (options.direct_min_bytes == 0) options.direct_min_bytes = kDefaultDirectMinBytes;
  if (options.window_min_bytes == 0) options.window_min_bytes = kDefaultWindowMinBytes;
  if (options.window_bytes < 0) {
    options.window_bytes =
        core::env_int("RINGLET_SHM_WINDOW_BYTES", 2 * mesh.world_size * kDefaultWindowChunkBytes, 0,
                      std::int64_t{1} << 40);
  }
  RINGLET_CHECK(options.window_bytes == 0 || options.window_bytes >= 256, ValueError,
                "RINGLET_SHM_WINDOW_BYTES=", options.window_bytes,
                " is too small: 0 (no windows) or at least 256 bytes");
  if (options.inline_bytes < 0) {
    options.inline_bytes =
        core::env_int("RINGLET_INLINE_BYTES", kDefaultInlineBytes, 0, std::int64_t{1} << 40);
  }
  if (options.trace_dir.empty()) options.trace_dir = core::env_string("RINGLET_TRACE").value_or("");
  impl->options = options;
  impl->tracer = std::make_unique<Tracer>(options.trace_dir, mesh.rank);
  for (int c = 0; c < options.channels; ++c) {
    auto ch = std::make_unique<Channel>();
    transport::MeshOptions m = mesh;
    m.prefix = core::str(options.name, "/ch", c, "/", mesh.prefix);
    ch->mesh = transport::Mesh::connect(store, m, deadline);
    ch->ctx.mesh = ch->mesh.get();
    ch->ctx.rank = mesh.rank;
    ch->ctx.size = mesh.world_size;
    ch->ctx.channel = c;
    ch->ctx.tracer = impl->tracer.get();
    ch->ctx.slice_bytes = options.slice_bytes;
    impl->channels.push_back(std::move(ch));
  }
  impl->peers_readable = impl->agree_on_peer_reads(mesh, deadline);
  RINGLET_CHECK(impl->peers_readable || options.algo != "direct", ValueError,
                "RINGLET_ALGO=direct needs every pair of ranks on one host with shm connections "
                "that can read each other's memory (cross-memory attach; RINGLET_SHM_CMA=1)");
  if (impl->peers_readable && impl->size > 1 && options.window_bytes > 0) {
    impl->setup_windows(mesh, deadline);
  }
  RINGLET_CHECK(impl->has_windows() || impl->size == 1 || options.algo != "window", ValueError,
                "RINGLET_ALGO=window needs every rank on one host with shm connections that can "
                "map each other's windows (and RINGLET_SHM_WINDOW_BYTES > 0)");
  for (auto& ch : impl->channels) {
    ch->thread = std::thread([impl = impl.get(), c = ch.get()] { impl->channel_loop(*c); });
  }
  return std::unique_ptr<Communicator>(new Communicator(std::move(impl)));
}

Communicator::Communicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Communicator::~Communicator() {
  for (auto& ch : impl_->channels) {
    {
      std::lock_guard lock(ch->mutex);
      ch->stopping = true;
    }
    ch->cv.notify_all();
  }
  for (auto& ch : impl_->channels) ch->thread.join();
}

int Communicator::rank() const { return impl_->rank; }
int Communicator::size() const { return impl_->size; }
std::chrono::milliseconds Communicator::timeout() const { return impl_->options.timeout; }

WorkPtr Communicator::all_reduce(const void* send, void* recv, std::size_t count, DType dtype,
                                 ReduceOp op) {
  impl_->check_dtype(dtype, "all_reduce");
  impl_->check_buffer(send, count, "send buffer", "all_reduce");
  impl_->check_buffer(recv, count, "recv buffer", "all_reduce");
  const std::size_t es = core::dtype_size(dtype);
  const int n = impl_->size;
  const std::string& algo = impl_->options.algo;
  const std::size_t bytes = count * es;
  const bool automatic = algo == "auto";
  // Shared windows, when the ranks have them, from window_min_bytes; else recursive doubling up
  // to rd_max_bytes, then the ring, or cross-memory attach from direct_min_bytes.
  const bool use_window =
      n > 1 && impl_->has_windows() &&
      (algo == "window" || (automatic && bytes >= impl_->options.window_min_bytes));
  const bool use_rd =
      !use_window && (algo == "rd" || (automatic && bytes <= impl_->options.rd_max_bytes));
  const bool use_direct =
      !use_rd && !use_window && impl_->peers_readable &&
      (algo == "direct" || (automatic && bytes >= impl_->options.direct_min_bytes));
  Fingerprint fp{OpKind::all_reduce, dtype, op, 0, -1, count, 0};
  auto finish = [n, dtype, op](char* data, std::size_t c) {
    if (op == ReduceOp::avg) divide_by(data, c, dtype, n);
  };
  if (use_rd || use_direct || use_window || impl_->channels.size() == 1) {
    return impl_->submit(
        "all_reduce", true, fp, 0,
        [=](ChannelContext& ctx) {
          char* data = static_cast<char*>(recv);
          if (use_rd) {
            if (send != recv && count > 0) std::memcpy(data, send, count * es);
            rd_all_reduce(ctx, data, count, dtype, op);
          } else if (use_window) {
            window_all_reduce(ctx, data, count, dtype, op, static_cast<const char*>(send));
          } else if (use_direct) {
            direct_all_reduce(ctx, data, count, dtype, op, static_cast<const char*>(send));
          } else {
            ring_all_reduce(ctx, data, count, dtype, op, static_cast<const char*>(send));
          }
          finish(data, count);
        },
        {}, use_rd || use_direct || use_window);
  }
  const int channels = static_cast<int>(impl_->channels.size());
  return impl_->submit("all_reduce", true, fp, -1, {}, [=](ChannelContext& ctx, int c) {
    const std::size_t begin = split_offset(count, channels, c);
    const std::size_t end = split_offset(count, channels, c + 1);
    char* data = static_cast<char*>(recv) + begin * es;
    ring_all_reduce(ctx, data, end - begin, dtype, op, static_cast<const char*>(send) + begin * es);
    finish(data, end - begin);
  });
}

WorkPtr Communicator::reduce_scatter(const void* send, void* recv, std::size_t recv_count,
                                     DType dtype, ReduceOp op) {
  impl_->check_dtype(dtype, "reduce_scatter");
  impl_->check_buffer(send, recv_count, "send buffer", "reduce_scatter");
  impl_->check_buffer(recv, recv_count, "recv buffer", "reduce_scatter");
  const std::size_t es = core::dtype_size(dtype);
  const int n = impl_->size, r = impl_->rank;
  Fingerprint fp{OpKind::reduce_scatter, dtype, op, 0, -1, recv_count, 0};
  return impl_->submit("reduce_scatter", true, fp, 0, [=](ChannelContext& ctx) {
    std::vector<char> work(recv_count * n * es);
    if (!work.empty()) std::memcpy(work.data(), send, work.size());
    ring_reduce_scatter_blocks(ctx, work.data(), recv_count, dtype, op);
    char* mine = work.data() + r * recv_count * es;
    if (op == ReduceOp::avg) divide_by(mine, recv_count, dtype, n);
    if (recv_count > 0) std::memcpy(recv, mine, recv_count * es);
  });
}

WorkPtr Communicator::all_gather(const void* send, void* recv, std::size_t send_count,
                                 DType dtype) {
  impl_->check_dtype(dtype, "all_gather");
  impl_->check_buffer(send, send_count, "send buffer", "all_gather");
  impl_->check_buffer(recv, send_count, "recv buffer", "all_gather");
  const std::size_t es = core::dtype_size(dtype);
  const int r = impl_->rank;
  Fingerprint fp{OpKind::all_gather, dtype, ReduceOp::sum, 0, -1, send_count, 0};
  return impl_->submit("all_gather", true, fp, 0, [=](ChannelContext& ctx) {
    char* mine = static_cast<char*>(recv) + r * send_count * es;
    if (send != mine && send_count > 0) std::memcpy(mine, send, send_count * es);
    ring_all_gather_blocks(ctx, static_cast<char*>(recv), send_count, dtype);
  });
}

WorkPtr Communicator::broadcast(void* data, std::size_t count, DType dtype, int root) {
  impl_->check_dtype(dtype, "broadcast");
  impl_->check_rank(root, "root", "broadcast");
  impl_->check_buffer(data, count, "buffer", "broadcast");
  Fingerprint fp{OpKind::broadcast, dtype, ReduceOp::sum, 0, root, count, 0};
  return impl_->submit("broadcast", true, fp, 0, [=](ChannelContext& ctx) {
    chain_broadcast(ctx, static_cast<char*>(data), count, dtype, root);
  });
}

WorkPtr Communicator::reduce(const void* send, void* recv, std::size_t count, DType dtype,
                             ReduceOp op, int root) {
  impl_->check_dtype(dtype, "reduce");
  impl_->check_rank(root, "root", "reduce");
  impl_->check_buffer(send, count, "send buffer", "reduce");
  if (impl_->rank == root) impl_->check_buffer(recv, count, "recv buffer on the root", "reduce");
  const std::size_t es = core::dtype_size(dtype);
  const int n = impl_->size;
  const bool is_root = impl_->rank == root;
  Fingerprint fp{OpKind::reduce, dtype, op, 0, root, count, 0};
  return impl_->submit("reduce", true, fp, 0, [=](ChannelContext& ctx) {
    std::vector<char> own;
    char* data;
    if (is_root) {
      data = static_cast<char*>(recv);
      if (send != recv && count > 0) std::memcpy(data, send, count * es);
    } else {
      own.assign(static_cast<const char*>(send), static_cast<const char*>(send) + count * es);
      data = own.data();
    }
    chain_reduce(ctx, data, count, dtype, op, root);
    if (is_root && op == ReduceOp::avg) divide_by(data, count, dtype, n);
  });
}

WorkPtr Communicator::barrier() {
  Fingerprint fp{OpKind::barrier, DType::u8, ReduceOp::sum, 0, -1, 0, 0};
  return impl_->submit("barrier", true, fp, 0,
                       [](ChannelContext& ctx) { dissemination_barrier(ctx); });
}

WorkPtr Communicator::send(const void* data, std::size_t count, DType dtype, int peer) {
  impl_->check_dtype(dtype, "send");
  impl_->check_rank(peer, "peer", "send");
  RINGLET_CHECK(peer != impl_->rank, ValueError, "send: rank ", peer, " cannot send to itself");
  impl_->check_buffer(data, count, "buffer", "send");
  const std::size_t bytes = count * core::dtype_size(dtype);
  return impl_->submit_p2p("send", peer, bytes,
                           [=](transport::Connection& c) { return c.send(data, bytes); });
}

WorkPtr Communicator::recv(void* data, std::size_t count, DType dtype, int peer) {
  impl_->check_dtype(dtype, "recv");
  impl_->check_rank(peer, "peer", "recv");
  RINGLET_CHECK(peer != impl_->rank, ValueError, "recv: rank ", peer,
                " cannot receive from itself");
  impl_->check_buffer(data, count, "buffer", "recv");
  const std::size_t bytes = count * core::dtype_size(dtype);
  return impl_->submit_p2p("recv", peer, bytes,
                           [=](transport::Connection& c) { return c.recv(data, bytes); });
}

void Communicator::abort(const std::string& reason) {
  impl_->fail_communicator(core::str("rank ", impl_->rank, ": communicator aborted: ", reason),
                           core::str("rank ", impl_->rank, " aborted: ", reason));
}

bool Communicator::aborted() const { return impl_->current_failure() != nullptr; }

}  // namespace ringlet::collectives
