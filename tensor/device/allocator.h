// The caching allocator of a device (cuda or emu), stream-ordered as PyTorch's:
// - A block is allocated on the current stream of the allocating thread and, freed, serves
//   later allocations on that same stream at once (their kernels queue behind every use).
// - A tensor used on another stream too is marked with record_stream(); when it is freed its
//   block waits (an event recorded on each such stream) until those streams are past it, and
//   only then returns to the cache. Without the mark, a block could be handed to a new tensor
//   while a kernel on the other stream still reads it (the stream tests show that corruption).
// - Out of memory: blocks still waiting for their events are waited for, the cache gives back
//   what it holds, and the allocation is tried once more; then an OutOfMemoryError says what
//   was asked, what tensors hold and what is cached, and the device's capacity.
// - Graph capture (tensor/device/graph.h): while a stream captures, its allocations are the
//   graph's: served from the cache (a miss would reach the driver, which a capture cannot hold:
//   CaptureError), and the graph's for as long as it lives: freed, such a block waits in the
//   graph's pool, which only a capture into that pool takes from, so a replay never finds its
//   memory handed to another tensor. Releasing the pool returns them to the cache.
// Plus the pinned host allocator: host memory the device copies asynchronously (cudaHostAlloc
// on a machine with a GPU; aligned host memory otherwise, where the emulated device needs no
// pinning), cached like the host's.
#pragma once

#include <deque>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "device/runtime.h"
#include "tensor/block_cache.h"
#include "tensor/storage.h"

namespace ringlet::tensor {

class DeviceAllocator final : public Allocator {
 public:
  explicit DeviceAllocator(Device device);
  void* allocate(std::size_t bytes) override;
  void deallocate(void* ptr, std::size_t bytes) override;
  void record_stream(void* ptr, device::StreamHandle stream) override;
  Device device() const override { return device_; }
  BlockCacheStats stats() const;
  void empty();

  // Graph capture on `stream` (one at a time per device): returns the new pool's id.
  int begin_capture(device::StreamHandle stream);
  void end_capture();
  // The graph is gone: its pool's blocks go back to the cache, its live ones become ordinary.
  void release_pool(int pool);

 private:
  struct Live {
    device::StreamHandle stream;                // allocated on
    std::vector<device::StreamHandle> used_on;  // record_stream()'s other streams
    int pool = 0;                               // the graph's whose capture allocated it, else 0
  };
  struct PoolBlock {
    void* ptr;
    std::size_t size;  // its size class
    device::StreamHandle stream;
  };
  struct Pending {
    void* ptr;
    std::size_t bytes;
    device::StreamHandle stream;
    std::vector<device::EventHandle> events;  // one per stream in used_on, recorded at free
  };
  void collect_pending(bool wait);  // called with mutex_ held

  Device device_;
  device::Runtime& runtime_;
  BlockCache cache_;
  std::mutex mutex_;
  std::unordered_map<void*, Live> live_;
  std::deque<Pending> pending_;
  device::StreamHandle capture_stream_ = nullptr;  // the stream capturing now, if any
  int capture_pool_ = 0, next_pool_ = 0;
  std::unordered_map<int, std::vector<PoolBlock>> pools_;  // live pools' freed blocks
};

// The allocator of a device (created on first use, never destroyed) after checking it exists.
DeviceAllocator& device_allocator(Device device);
// Page-locked host memory for asynchronous copies (Tensor::pin_memory()).
Allocator& pinned_allocator();

}  // namespace ringlet::tensor
