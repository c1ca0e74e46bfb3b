// Device spaces without a collective across processes: the emulated device's reductions refuse
// memory a GPU cannot reach, a rank's window outlives its space while a peer thread reads it, and
// the policy that keeps device flags from CUDA ranks that are threads of one process.
#include <doctest/doctest.h>
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "collectives/device_reduce.h"
#include "collectives/device_space.h"
#include "collectives/types.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "device/runtime.h"
#include "device/stream.h"
#include "memory_store.h"
#include "mesh_ranks.h"

using namespace ringlet;
using namespace ringlet::testing;
using collectives::ReduceOp;
using core::DType;

// The emulated device's kernels read what a GPU's can reach, and refuse the rest as a GPU's
// would fault: a staged algorithm once reduced from its receive space, pageable host memory,
// which passed here and stopped an H200 with an illegal memory access.
TEST_CASE("the emulated device refuses a reduction from pageable host memory, as a GPU faults") {
  const core::Device dev = core::Device::emu(0);
  device::Runtime& rt = device::runtime(dev);
  const collectives::DeviceReduce& reduce = collectives::device_reduce(dev);
  constexpr std::size_t kCount = 64;
  auto* own = static_cast<float*>(rt.malloc(kCount * sizeof(float)));
  auto* pinned = static_cast<float*>(rt.host_alloc_pinned(kCount * sizeof(float)));
  std::vector<float> pageable(kCount, 1.0f);
  const device::StreamHandle stream = rt.compute_stream();
  const void* from_pinned[] = {own, pinned};
  CHECK_NOTHROW(
      reduce.reduce_many(own, from_pinned, 2, kCount, DType::f32, ReduceOp::sum, dev, stream));
  const void* from_pageable[] = {own, pageable.data()};
  CHECK_THROWS_WITH_AS(
      reduce.reduce_many(own, from_pageable, 2, kCount, DType::f32, ReduceOp::sum, dev, stream),
      doctest::Contains("illegal memory access"), core::DeviceError);
  const void* past_the_end[] = {own, own + 1};  // one element past its allocation
  CHECK_THROWS_AS(
      reduce.reduce_many(own, past_the_end, 2, kCount, DType::f32, ReduceOp::sum, dev, stream),
      core::DeviceError);
  rt.synchronize(stream);
  rt.host_free_pinned(pinned);
  rt.free(own);
}

// Ranks that are threads read each other's windows as plain pointers: a rank whose space closes
// while a peer's stream still has a copy from its window queued must leave the window to that
// peer (the host-driven window all-reduce's last gather can be in flight so). In a child
// process: a window freed under the copy kills it.
int read_after_owner_left() {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid != 0) return wait_child(pid, 60s);
  MemoryStore store;
  std::unique_ptr<collectives::DeviceSpace> spaces[2];
  collectives::DeviceSpaceOptions so;
  so.link = collectives::DeviceLink::ipc;
  so.window_bytes = 64 * 1024;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      spaces[rank] = collectives::DeviceSpace::create(
          store, "left", rank, 2, core::Device::emu(rank), so, core::Deadline::after(30s));
    });
  }
  for (auto& t : threads) t.join();
  if (!spaces[1]->ipc()) ::_exit(5);
  device::Runtime& rt = device::runtime(core::Device::emu(1));
  const device::Stream stream = device::new_stream(core::Device::emu(1));
  std::promise<void> go;
  rt.host_func(stream.handle(), [ready = go.get_future().share()] { ready.wait(); });
  void* into = rt.malloc(so.window_bytes);
  rt.copy_async(into, spaces[1]->windows()[0], so.window_bytes, stream.handle());
  spaces[0].reset();  // rank 0 leaves with rank 1's copy from its window still queued
  go.set_value();
  rt.synchronize(stream.handle());
  spaces[1].reset();
  rt.free(into);
  ::_exit(0);
}

TEST_CASE("ranks that are threads: a window outlives its rank's space while a peer reads it") {
  CHECK(read_after_owner_left() == 0);
}

TEST_CASE("device flags: not for CUDA ranks that are threads of one process") {
  collectives::DeviceFlagsFacts facts;
  facts.shared_host_block = true;
  facts.size = 2;
  facts.window_bytes = std::size_t{16} << 20;
  facts.stream_memory_ops = true;
  CHECK(collectives::device_flags_problem(facts) == "");  // processes, on either device
  facts.cuda = true;
  CHECK(collectives::device_flags_problem(facts) == "");
  facts.one_process = facts.shares_a_process = true;  // threads
  CHECK(collectives::device_flags_problem(facts).find("CUDA driver") != std::string::npos);
  facts.cuda = false;  // the emulated device has no driver to block in
  CHECK(collectives::device_flags_problem(facts) == "");
  facts.wanted = false;
  CHECK(collectives::device_flags_problem(facts) == "RINGLET_DEVICE_FLAGS=0");
}
