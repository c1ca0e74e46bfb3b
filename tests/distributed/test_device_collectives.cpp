// Collectives on device buffers of the emulated GPU, ranks as separate processes (forked before
// any device thread exists; the parent only hosts the store): world sizes 1-4; counts 0, 1,
// below the world size, awkward and spanning many window pieces and slices; every dtype x op;
// in place and out of place; over the ipc link (device windows opened across the processes),
// staged over tcp and shm, and staged on two simulated hosts (the hierarchical all-reduce); with
// the emulated streams' jitter on. Each op's input is queued on the compute stream without waiting
// (the op must order itself after it), and half of the results are read after wait_on_stream (the
// stream waits, not the host). Then the other collectives, and a rank killed with SIGKILL during a
// device all-reduce. With device flags (the ipc link), steady-state all-reduces make no host wait
// and send no host message, counted by the communicator, for 1-4 ranks as processes and as
// threads of one process. The same matrix and fault test run on a CUDA GPU where there is one
// (all ranks on cuda:0, several per GPU), and skip visibly where there is none.
#include <doctest/doctest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <exception>
#include <fstream>
#include <future>
#include <sstream>
#include <string>
#include <thread>

#include "collective_values.h"
#include "collectives/device_reduce.h"
#include "collectives/device_space.h"
#include "comm_ranks.h"
#include "core/error.h"
#include "cuda_probe.h"
#include "device/counters.h"
#include "device/stream.h"
#include "temp_dir.h"
#include "transport/shm/process_watch.h"

using namespace ringlet;
using namespace ringlet::testing;

namespace {

const auto kWait = 60s;

struct Rank {
  int rank, size;
  Communicator& comm;
  collectives::DeviceSpace& space;
  device::Runtime& rt;
  device::Stream stream;  // the compute stream: where inputs are queued and results read
};

// Device memory holding a copy of a host buffer, queued on the compute stream (not waited).
struct DeviceBuffer {
  device::Runtime& rt;
  void* ptr;
  DeviceBuffer(Rank& r, const TypedBuffer& host) : rt(r.rt), ptr(rt.malloc(host.bytes.size() + 1)) {
    REQUIRE(ptr != nullptr);
    rt.copy_async(ptr, host.bytes.data(), host.bytes.size(), r.stream.handle());
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { rt.free(ptr); }
};

// The device buffer's contents, read once `work` is done: through the stream (wait_on_stream)
// or by the host (work->wait), alternately.
TypedBuffer read_back(Rank& r, const collectives::WorkPtr& work, const DeviceBuffer& buf,
                      DType dtype, std::size_t count) {
  static int turn = 0;
  if (++turn % 2 == 0) {
    collectives::wait_on_stream(work, r.stream, core::Deadline::after(kWait));
  } else {
    work->wait(core::Deadline::after(kWait));
  }
  TypedBuffer out(dtype, count);
  r.rt.copy_async(out.bytes.data(), buf.ptr, out.bytes.size(), r.stream.handle());
  r.rt.synchronize(r.stream.handle());
  return out;
}

int all_reduce_matrix(Rank& r) {
  int wrong = 0;
  for (std::size_t count : {std::size_t{0}, std::size_t{1}, static_cast<std::size_t>(r.size - 1),
                            std::size_t{1031}, std::size_t{20011}}) {
    for (DType dtype : kDTypes) {
      for (ReduceOp op : kOps) {
        for (bool in_place : {false, true}) {
          TypedBuffer send(dtype, count), none(dtype, count);
          for (std::size_t i = 0; i < count; ++i) send.set(i, value(r.rank, i, op));
          DeviceBuffer in(r, send), out(r, none);
          void* dst = in_place ? in.ptr : out.ptr;
          auto work = r.comm.all_reduce(in.ptr, dst, count, dtype, op, &r.space);
          const TypedBuffer got = read_back(r, work, in_place ? in : out, dtype, count);
          for (std::size_t i = 0; i < count; ++i) {
            if (got.get(i) != expected(r.size, i, op, dtype) && ++wrong <= 3) {
              std::fprintf(stderr, "rank %d n=%d count=%zu %s %s %s: [%zu] = %g, expected %g\n",
                           r.rank, r.size, count, std::string(core::dtype_name(dtype)).c_str(),
                           collectives::reduce_op_name(op), in_place ? "in place" : "out of place",
                           i, got.get(i), expected(r.size, i, op, dtype));
            }
          }
        }
      }
    }
  }
  return wrong;
}

int others(Rank& r) {
  const int n = r.size, rank = r.rank;
  int wrong = 0;
  const auto expect = [&](bool ok, const char* what) {
    if (!ok && ++wrong <= 3) std::fprintf(stderr, "rank %d n=%d: %s wrong\n", rank, n, what);
  };
  for (std::size_t block : {std::size_t{1}, std::size_t{777}}) {
    for (DType dtype : {DType::f32, DType::bf16, DType::i64}) {
      TypedBuffer send(dtype, block * n), none(dtype, block);
      for (std::size_t i = 0; i < block * n; ++i) send.set(i, value(rank, i, ReduceOp::sum));
      DeviceBuffer din(r, send), dout(r, none);
      auto rs = r.comm.reduce_scatter(din.ptr, dout.ptr, block, dtype, ReduceOp::sum, &r.space);
      TypedBuffer got = read_back(r, rs, dout, dtype, block);
      for (std::size_t i = 0; i < block; ++i)
        expect(got.get(i) == expected(n, rank * block + i, ReduceOp::sum, dtype), "reduce_scatter");

      TypedBuffer mine(dtype, block), all(dtype, block * n);
      for (std::size_t i = 0; i < block; ++i) mine.set(i, value(rank, i, ReduceOp::max));
      DeviceBuffer dmine(r, mine), dall(r, all);
      auto ag = r.comm.all_gather(dmine.ptr, dall.ptr, block, dtype, &r.space);
      got = read_back(r, ag, dall, dtype, block * n);
      for (std::size_t i = 0; i < block * n; ++i)
        expect(got.get(i) == value(static_cast<int>(i / block), i % block, ReduceOp::max),
               "all_gather");

      const int root = n - 1;
      TypedBuffer b(dtype, block);
      for (std::size_t i = 0; i < block; ++i)
        b.set(i, rank == root ? value(root, i, ReduceOp::max) : -1);
      DeviceBuffer db(r, b);
      got = read_back(r, r.comm.broadcast(db.ptr, block, dtype, root, &r.space), db, dtype, block);
      for (std::size_t i = 0; i < block; ++i)
        expect(got.get(i) == value(root, i, ReduceOp::max), "broadcast");

      for (ReduceOp op : {ReduceOp::max, ReduceOp::avg}) {
        TypedBuffer contrib(dtype, block);
        for (std::size_t i = 0; i < block; ++i) contrib.set(i, value(rank, i, op));
        DeviceBuffer dc(r, contrib), dres(r, none);
        auto red = r.comm.reduce(dc.ptr, dres.ptr, block, dtype, op, 0, &r.space);
        got = read_back(r, red, dres, dtype, block);
        for (std::size_t i = 0; rank == 0 && i < block; ++i)
          expect(got.get(i) == expected(n, i, op, dtype), "reduce");
      }
    }
  }
  r.comm.barrier()->wait(core::Deadline::after(kWait));
  if (n > 1) {  // a ring of sends and receives, the receive posted first
    TypedBuffer out(DType::i64, 1000), in(DType::i64, 1000);
    for (std::size_t i = 0; i < 1000; ++i) out.set(i, rank * 1000 + static_cast<double>(i));
    DeviceBuffer dout(r, out), din(r, in);
    auto rv = r.comm.recv(din.ptr, 1000, DType::i64, (rank + n - 1) % n, &r.space);
    auto sd = r.comm.send(dout.ptr, 1000, DType::i64, (rank + 1) % n, &r.space);
    sd->wait(core::Deadline::after(kWait));
    const TypedBuffer got = read_back(r, rv, din, DType::i64, 1000);
    for (std::size_t i = 0; i < 1000; ++i)
      expect(got.get(i) == ((rank + n - 1) % n) * 1000 + static_cast<double>(i), "send/recv");
  }
  return wrong;
}

// A rank loops over large device all-reduces until killed; the survivors report the error.
int until_failure(Rank& r) {
  TypedBuffer data(DType::f32, 1 << 20);
  DeviceBuffer d(r, data);
  for (int i = 0; i < 100000; ++i) {
    auto work = r.comm.all_reduce(d.ptr, d.ptr, 1 << 20, DType::f32, ReduceOp::sum, &r.space);
    collectives::wait_on_stream(work, r.stream, core::Deadline::after(kWait));
    r.rt.synchronize(r.stream.handle());
  }
  return 0;
}

// Whether process `pid` has exited within `limit`, as the transports see a peer's exit
// (transport::ProcessWatch: its pidfd, as the device control's, else /proc).
bool exited_within(long pid, std::chrono::seconds limit) {
  const transport::ProcessWatch watch(static_cast<pid_t>(pid));
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!watch.exited()) {
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

// One all-reduce; then rank 1 leaves without closing its communicator, and once it has exited a
// survivor's next device all-reduce fails at its issue, naming rank 1, with none of its work
// queued on the device (work that waits for a dead peer can hold a GPU driver's caller). Ends
// the process.
[[noreturn]] void after_peer_exit(Rank& r, transport::Store& store) {
  TypedBuffer data(DType::f32, 4096);
  DeviceBuffer d(r, data);
  auto first = r.comm.all_reduce(d.ptr, d.ptr, 4096, DType::f32, ReduceOp::sum, &r.space);
  first->wait(core::Deadline::after(kWait));
  r.rt.synchronize(r.stream.handle());
  if (r.rank == 1) {
    store.set("exit/pid", std::to_string(::getpid()));
    ::_exit(0);
  }
  const long pid = std::stol(store.get("exit/pid", core::Deadline::after(kWait)));
  if (!exited_within(pid, 10s)) ::_exit(7);
  const device::DeviceCounts before = device::device_counts(r.stream.device());
  auto work = r.comm.all_reduce(d.ptr, d.ptr, 4096, DType::f32, ReduceOp::sum, &r.space);
  const device::DeviceCounts queued = device::device_counts(r.stream.device()) - before;
  const std::exception_ptr error = work->error();
  const std::string said = error ? core::error_text(error) : "";
  std::fprintf(stderr, "rank %d: %llu stream ops queued; %s\n", r.rank,
               static_cast<unsigned long long>(queued.stream_ops),
               error ? said.c_str() : "no error at issue");
  std::fflush(stderr);
  // Queued: none of the op's work; at most the flag writes that release this rank's window (2
  // per rank), by the watchdog, which may see the exit first.
  const bool nothing_of_it = queued.stream_ops <= 2 * static_cast<std::uint64_t>(r.size);
  ::_exit(error && said.find("rank 1") != std::string::npos && nothing_of_it ? 0 : 1);
}

// Steady state with device flags: all-reduces of one-shot and two-shot sizes, each read through
// the compute stream, with the communicator's counters before and after: not one host wait or
// host message per op. Returns the number of wrong things (printed).
int host_free(Rank& r) {
  int wrong = 0;
  const auto expect = [&](bool ok, const std::string& what) {
    if (!ok && ++wrong <= 5)
      std::fprintf(stderr, "rank %d n=%d: %s\n", r.rank, r.size, what.c_str());
  };
  const std::size_t counts[] = {1, 1000, 100000, 1 << 20};  // f32: 4 B, 4 KB, 400 KB, 4 MiB
  struct Buffers {
    std::size_t count;
    std::unique_ptr<DeviceBuffer> in, out;
  };
  std::vector<Buffers> buffers;
  for (std::size_t count : counts) {
    TypedBuffer send(DType::f32, count), none(DType::f32, count);
    for (std::size_t i = 0; i < count; ++i) send.set(i, value(r.rank, i, ReduceOp::sum));
    buffers.push_back(
        {count, std::make_unique<DeviceBuffer>(r, send), std::make_unique<DeviceBuffer>(r, none)});
    r.rt.synchronize(r.stream.handle());  // the copies read `send` and `none`
  }
  const auto round = [&] {
    for (const Buffers& b : buffers) {
      auto work =
          r.comm.all_reduce(b.in->ptr, b.out->ptr, b.count, DType::f32, ReduceOp::sum, &r.space);
      collectives::wait_on_stream(work, r.stream, core::Deadline::after(kWait));
    }
  };
  round();  // the first op of each kind may set things up
  const collectives::CommCounters before = r.comm.counters();
  for (int i = 0; i < 5; ++i) round();
  r.rt.synchronize(r.stream.handle());  // every op has run: its host work is counted
  const collectives::CommCounters used = r.comm.counters() - before;
  std::fprintf(stderr, "rank %d n=%d: %llu ops, %llu host waits, %llu host messages\n", r.rank,
               r.size, static_cast<unsigned long long>(used.ops),
               static_cast<unsigned long long>(used.host_waits),
               static_cast<unsigned long long>(used.host_messages));
  expect(used.ops == 20, "not 20 ops counted");
  expect(used.host_waits == 0, "host waits in steady state");
  expect(used.host_messages == 0, "host messages in steady state");
  if (r.size > 1) {
    expect(r.comm.all_reduce_algorithm(4, &r.space) == collectives::Algorithm::one_shot,
           "4 bytes are not one-shot");
    expect(r.comm.all_reduce_algorithm(4 << 20, &r.space) == collectives::Algorithm::two_shot,
           "4 MiB are not two-shot");
  }
  for (const Buffers& b : buffers) {
    TypedBuffer got(DType::f32, b.count);
    r.rt.copy_async(got.bytes.data(), b.out->ptr, got.bytes.size(), r.stream.handle());
    r.rt.synchronize(r.stream.handle());
    for (std::size_t i = 0; i < b.count; ++i) {
      if (got.get(i) != expected(r.size, i, ReduceOp::sum, DType::f32)) {
        expect(false, core::str("count ", b.count, ": [", i, "] wrong"));
        break;
      }
    }
  }
  return wrong;
}

// RINGLET_ALGO=`request` on a device space: the all-reduce runs the algorithm asked for, exact
// for every dtype and op (and Bruck's and Rabenseifner's all-gather and reduce-scatter halves
// where the ranks have no device flags). The ring and the hierarchical all-reduce (its ranks on two
// simulated hosts), Rabenseifner's and the tree (staged whole through the host) are driven by the
// host: they send host messages; one-shot and two-shot (and the window, two-shot there) run on the
// device: none.
int requested(Rank& r, const std::string& request) {
  int wrong = 0;
  const auto expect = [&](bool ok, const std::string& what) {
    if (!ok && ++wrong <= 5)
      std::fprintf(stderr, "rank %d n=%d %s: %s\n", r.rank, r.size, request.c_str(), what.c_str());
  };
  // Bruck's is no all-reduce: asked for, the all-reduce is auto's (the device's one-shot with
  // device flags, else the ring staged through the host).
  const bool flags = r.space.device_flags() != nullptr;
  const bool host_driven = request == "ring" || request == "hierarchical" ||
                           request == "rabenseifner" || request == "tree" ||
                           (request == "bruck" && !flags);
  const auto want =
      request == "ring" || (request == "bruck" && !flags) ? collectives::Algorithm::ring
      : request == "hierarchical"                         ? collectives::Algorithm::hierarchical
      : request == "rabenseifner"                         ? collectives::Algorithm::rabenseifner
      : request == "tree"                                 ? collectives::Algorithm::tree
      : request == "two_shot" || request == "window"      ? collectives::Algorithm::two_shot
                                                          : collectives::Algorithm::one_shot;
  const auto got = r.comm.all_reduce_algorithm(4, &r.space);
  expect(got == want, core::str("runs ", collectives::algorithm_name(got), ", not ",
                                collectives::algorithm_name(want)));
  const collectives::CommCounters before = r.comm.counters();
  for (std::size_t count : {std::size_t{1}, std::size_t{1031}, std::size_t{20011}}) {
    for (DType dtype : kDTypes) {
      for (ReduceOp op : kOps) {
        TypedBuffer send(dtype, count), none(dtype, count);
        for (std::size_t i = 0; i < count; ++i) send.set(i, value(r.rank, i, op));
        DeviceBuffer in(r, send), out(r, none);
        auto work = r.comm.all_reduce(in.ptr, out.ptr, count, dtype, op, &r.space);
        const TypedBuffer result = read_back(r, work, out, dtype, count);
        for (std::size_t i = 0; i < count; ++i) {
          if (result.get(i) != expected(r.size, i, op, dtype)) {
            expect(false, core::str("count ", count, " ", core::dtype_name(dtype), " ",
                                    collectives::reduce_op_name(op), ": [", i, "] wrong"));
            break;
          }
        }
      }
    }
  }
  r.rt.synchronize(r.stream.handle());
  const collectives::CommCounters used = r.comm.counters() - before;
  expect(host_driven == (used.host_messages > 0),
         core::str(used.host_messages, " host messages in ", used.ops, " ops"));
  // Without device flags, the all-gather and reduce-scatter asked for (Bruck's; recursive
  // doubling and halving, Rabenseifner's halves) run staged through the host, exact.
  if ((request == "bruck" || request == "rabenseifner") && !flags) {
    const auto ag = r.comm.all_gather_algorithm(&r.space);
    const auto rs = r.comm.reduce_scatter_algorithm(&r.space);
    expect(ag == (request == "bruck" ? collectives::Algorithm::bruck
                                     : collectives::Algorithm::doubling),
           core::str("all_gather runs ", collectives::algorithm_name(ag)));
    expect(
        rs == (request == "bruck" ? collectives::Algorithm::ring : collectives::Algorithm::halving),
        core::str("reduce_scatter runs ", collectives::algorithm_name(rs)));
    wrong += others(r);
  }
  return wrong;
}

struct Job {
  int n;
  std::string link;            // ipc, tcp, shm
  std::string mode;            // matrix, fault, exit_between, counters, algo=<RINGLET_ALGO's value>
  std::string device = "emu";  // emu: rank r on emu:(r % 2); cuda: every rank on cuda:0
};

// One rank, in a forked child: store, communicator, device space, then the job.
int run_rank(const Job& job, int rank, int port) {
  ::setenv("RINGLET_EMU_JITTER_US", "30", 1);
  transport::TcpStore store("127.0.0.1", port, core::Deadline::after(30s));
  CommOptions options;
  options.name = "dev";
  options.slice_bytes = 4096;  // many staged slices per chunk
  if (job.mode == "fault") options.timeout = 20s;
  const bool request = job.mode.rfind("algo=", 0) == 0;
  if (request) options.algo = job.mode.substr(5);
  // The space first: the communicator's progress thread uses it until the communicator goes.
  collectives::DeviceSpaceOptions so;
  // "hosts": staged, ranks 0 .. n/2-1 on one simulated host and the rest on another.
  const bool hosts = job.link == "hosts";
  // A hierarchical request on the ipc link: device flags, the ranks on two simulated hosts.
  const bool split_hosts = hosts || job.mode == "algo=hierarchical";
  so.link = collectives::parse_device_link(hosts ? "shm" : job.link);
  so.window_bytes = 64 * 1024;  // pieces of 32 KiB: many window rounds
  const core::Device dev =
      job.device == "cuda" ? core::Device::cuda(0) : core::Device::emu(rank % 2);
  auto space = collectives::DeviceSpace::create(store, "dev", rank, job.n, dev, so,
                                                core::Deadline::after(30s));
  const std::string transport = job.link == "tcp" ? "tcp" : "shm";
  transport::MeshOptions mesh = mesh_options(rank, job.n, split_hosts ? "auto" : transport, "m");
  if (split_hosts) mesh.host_id = rank < job.n / 2 ? "host-a" : "host-b";
  auto comm = Communicator::create(store, mesh, options, core::Deadline::after(30s));
  if (job.link == "ipc" && job.n > 1 && !space->ipc()) return 5;
  if (hosts &&
      comm->all_reduce_algorithm(1 << 20, space.get()) != collectives::Algorithm::hierarchical) {
    return 6;
  }
  Rank r{rank, job.n, *comm, *space, device::runtime(dev), device::compute_stream(dev)};
  // A failure ends the process at once: unwinding would free device buffers that the
  // communicator's progress thread may still be using.
  int wrong = 0;
  try {
    if (job.mode == "fault") return until_failure(r);
    if (job.mode == "exit_between") after_peer_exit(r, store);
    if (request) {
      wrong = requested(r, options.algo);
    } else {
      wrong = job.mode == "counters" ? host_free(r) : all_reduce_matrix(r) + others(r);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    ::_exit(2);
  }
  transport::store_barrier(store, "dev/end", job.n, core::Deadline::after(60s));
  return wrong == 0 ? 0 : 1;
}

// Forks the ranks (stderr of rank r into DIR/rank<r>.log) and hosts the store.
struct Ranks {
  std::vector<pid_t> pids;
  TempDir dir;
  std::unique_ptr<transport::TcpStoreServer> server;

  explicit Ranks(const Job& job) {
    std::vector<std::array<int, 2>> pipes(static_cast<std::size_t>(job.n));
    for (int r = 0; r < job.n; ++r) {
      REQUIRE(::pipe(pipes[r].data()) == 0);
      const std::string log = dir.path.string() + "/rank" + std::to_string(r) + ".log";
      const pid_t pid = ::fork();
      REQUIRE(pid >= 0);
      if (pid == 0) {
        int status = 3, port = 0;
        std::freopen(log.c_str(), "w", stderr);
        std::setvbuf(stderr, nullptr, _IONBF, 0);
        if (::read(pipes[r][0], &port, sizeof port) == static_cast<ssize_t>(sizeof port)) {
          try {
            status = run_rank(job, r, port);
          } catch (const std::exception& e) {
            std::fprintf(stderr, "rank %d: %s\n", r, e.what());
            status = 2;
          }
        }
        std::fflush(stderr);
        ::_exit(status);
      }
      pids.push_back(pid);
      ::close(pipes[r][0]);
    }
    server = std::make_unique<transport::TcpStoreServer>("127.0.0.1", 0);
    const int port = server->port();
    for (int r = 0; r < job.n; ++r) {
      REQUIRE(::write(pipes[r][1], &port, sizeof port) == static_cast<ssize_t>(sizeof port));
      ::close(pipes[r][1]);
    }
  }
  std::string log(int r) const {
    std::ifstream in(dir.path.string() + "/rank" + std::to_string(r) + ".log");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
};

void run_matrix(int n, const std::string& link, const std::string& device = "emu") {
  INFO("n=", n, " link ", link, " on ", device);
  Ranks ranks({n, link, "matrix", device});
  for (int r = 0; r < n; ++r) {
    const int status = wait_child(ranks.pids[r], 240s);
    INFO("rank ", r, " log:\n", ranks.log(r));
    CHECK(status == 0);
  }
}

}  // namespace

TEST_CASE("device collectives over ipc (device windows across processes)") {
  for (int n = 1; n <= 4; ++n) run_matrix(n, "ipc");
}
TEST_CASE("device collectives staged over tcp") {
  for (int n = 2; n <= 4; ++n) run_matrix(n, "tcp");
}
TEST_CASE("device collectives staged over shm") {
  for (int n = 2; n <= 4; ++n) run_matrix(n, "shm");
}

// Ranks as threads of one process (each other's windows are plain pointers), counting host work
// per op as host_free does; run in a forked child (stderr into `log`), so that this process
// starts no device thread before the other tests fork.
int counters_as_threads(int n, const std::string& log) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid != 0) return wait_child(pid, 240s);
  std::freopen(log.c_str(), "w", stderr);
  std::setvbuf(stderr, nullptr, _IONBF, 0);
  MemoryStore store;
  std::vector<int> status(static_cast<std::size_t>(n), 3);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        collectives::DeviceSpaceOptions so;
        so.link = collectives::DeviceLink::ipc;
        so.window_bytes = 64 * 1024;
        const core::Device dev = core::Device::emu(rank % 2);
        auto space = collectives::DeviceSpace::create(store, "dev", rank, n, dev, so,
                                                      core::Deadline::after(30s));
        CommOptions options;
        options.name = "dev";
        auto comm = Communicator::create(store, mesh_options(rank, n, "shm", "m"), options,
                                         core::Deadline::after(30s));
        if (n > 1 && !space->ipc()) {
          status[rank] = 5;
          return;
        }
        // Each rank its own stream, as a process has its own compute stream: ranks that share
        // a stream would queue one rank's wait before another's part of the same op.
        const device::Stream own = device::new_stream(dev);
        const device::StreamGuard current(own);
        Rank r{rank, n, *comm, *space, device::runtime(dev), own};
        const int wrong = host_free(r);
        comm->barrier()->wait(core::Deadline::after(kWait));
        status[rank] = wrong == 0 ? 0 : 1;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
        status[rank] = 2;
      }
    });
  }
  for (auto& t : threads) t.join();
  std::fflush(stderr);
  ::_exit(*std::max_element(status.begin(), status.end()));
}

void run_fault(const std::string& link, const std::string& device) {
  INFO("link ", link, " on ", device);
  Ranks ranks({3, link, "fault", device});
  std::this_thread::sleep_for(1500ms);  // the ranks are in their all-reduce loop
  const auto start = std::chrono::steady_clock::now();
  ::kill(ranks.pids[1], SIGKILL);
  for (int r : {0, 2}) {
    // Read when an assertion fails (doctest's INFO is lazy): the log as it stands then.
    INFO("rank ", r, " (pid ", ranks.pids[r], "; rank 1 killed, pid ", ranks.pids[1], ") log:\n",
         ranks.log(r));
    const int status = wait_child(ranks.pids[r], 60s);
    CHECK(status == 2);
    CHECK(ranks.log(r).find("all_reduce") != std::string::npos);
  }
  CHECK(std::chrono::steady_clock::now() - start < 20s);  // well within the op's deadline
  INFO("rank 1, killed (pid ", ranks.pids[1], ")");
  CHECK(wait_child(ranks.pids[1], 5s) == -SIGKILL);
}

TEST_CASE("a peer that exited between device ops: the next op fails at its issue, naming it") {
  Ranks ranks({3, "ipc", "exit_between"});
  for (int r = 0; r < 3; ++r) {
    INFO("rank ", r, " log:\n", ranks.log(r));  // read when a check fails
    CHECK(wait_child(ranks.pids[r], 60s) == 0);
  }
}

TEST_CASE("device all-reduces in steady state: no host wait, no host message (1-4 processes)") {
  for (int n = 1; n <= 4; ++n) {
    INFO("n=", n);
    Ranks ranks({n, "ipc", "counters"});
    for (int r = 0; r < n; ++r) {
      const int status = wait_child(ranks.pids[r], 240s);
      INFO("rank ", r, " log:\n", ranks.log(r));
      CHECK(status == 0);
    }
  }
}
TEST_CASE("device all-reduces in steady state: no host wait, no host message (1-4 threads)") {
  TempDir dir;
  for (int n = 1; n <= 4; ++n) {
    const std::string log = dir.path.string() + "/threads" + std::to_string(n) + ".log";
    const int status = counters_as_threads(n, log);
    std::ifstream in(log);
    std::stringstream text;
    text << in.rdbuf();
    INFO("n=", n, " log:\n", text.str());
    CHECK(status == 0);
  }
}
// Each RINGLET_ALGO value on device buffers of `device`, in processes over ipc, shm and tcp.
void run_requests(const std::string& device) {
  struct Request {
    int n;
    std::string link, algo;
  };
  std::vector<Request> requests;
  for (int n : {2, 3, 4}) {
    for (const std::string algo :
         {"ring", "hierarchical", "one_shot", "two_shot", "window", "rabenseifner", "tree"}) {
      // The hierarchical all-reduce on 2 hosts x 2 ranks; the rest at n 2, 3.
      if ((algo == "hierarchical") == (n == 4)) requests.push_back({n, "ipc", algo});
    }
  }
  for (const std::string algo : {"rabenseifner", "tree", "bruck"}) {
    requests.push_back({3, "shm", algo});
  }
  requests.push_back({2, "tcp", "bruck"});
  requests.push_back({4, "tcp", "rabenseifner"});
  for (const Request& request : requests) {
    INFO("n=", request.n, " ", request.link, " RINGLET_ALGO=", request.algo, " on ", device);
    Ranks ranks({request.n, request.link, "algo=" + request.algo, device});
    for (int r = 0; r < request.n; ++r) {
      const int status = wait_child(ranks.pids[r], 240s);
      INFO("rank ", r, " log:\n", ranks.log(r));
      CHECK(status == 0);
    }
  }
}
TEST_CASE("RINGLET_ALGO on a device space: the algorithm asked for runs, exactly") {
  run_requests("emu");
}
TEST_CASE("device collectives on 2 simulated hosts x 2 ranks: the hierarchical all-reduce") {
  run_matrix(4, "hosts");
}

TEST_CASE("a rank killed during device all-reduces: every survivor fails, naming the op") {
  for (const std::string link : {"ipc", "tcp"}) run_fault(link, "emu");
}

const char* const kNeedsGpu = "needs a CUDA GPU (none here, or built without CUDA)";

TEST_CASE("on a CUDA GPU: device collectives over ipc, several ranks on one GPU" *
          doctest::skip(!cuda_gpu_present()) * doctest::description(kNeedsGpu)) {
  for (int n = 1; n <= 4; ++n) run_matrix(n, "ipc", "cuda");
}
TEST_CASE("on a CUDA GPU: device collectives staged over tcp and shm" *
          doctest::skip(!cuda_gpu_present()) * doctest::description(kNeedsGpu)) {
  for (const std::string link : {"tcp", "shm"}) run_matrix(3, link, "cuda");
}
TEST_CASE("on a CUDA GPU: RINGLET_ALGO's algorithms on device buffers, exactly" *
          doctest::skip(!cuda_gpu_present()) * doctest::description(kNeedsGpu)) {
  run_requests("cuda");
}
TEST_CASE("on a CUDA GPU: a rank killed during device all-reduces" *
          doctest::skip(!cuda_gpu_present()) * doctest::description(kNeedsGpu)) {
  for (const std::string link : {"ipc", "tcp"}) run_fault(link, "cuda");
}
