// The emulated GPU: device::Runtime run by host threads (see stream_queue.h). Its memory is
// its own mappings (shared mappings of memfd files, which other processes open for IPC), filled
// with 0xff bytes (NaN as floats) when first handed out, so a kernel that reads what nobody wrote
// sees NaN; ops never give it to CPU kernels (tensor/ops check the device before dispatching).
// Capacity: RINGLET_EMU_MEMORY_MB (default 4096) per device; beyond it malloc returns nullptr and
// the caching allocator reports out of memory. free() first waits until every stream has run what
// it queued (as cudaFree waits for the device), so a block the cache gives back is never unmapped
// under a queued kernel.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>

#include "device/emu/stream_queue.h"
#include "device/runtime.h"

namespace ringlet::device::emu {

// The stream behind an emulated device's handle (kernels queue on it).
inline StreamQueue& queue(device::StreamHandle stream) {
  return *static_cast<StreamQueue*>(stream);
}

class EmuRuntime final : public device::Runtime {
 public:
  explicit EmuRuntime(int index);
  ~EmuRuntime() override;

  core::Device device() const override { return core::Device::emu(index_); }
  std::size_t memory_capacity() const override { return capacity_; }
  void* malloc(std::size_t bytes) override;
  void free(void* ptr) override;

  device::StreamHandle compute_stream() override { return compute_.get(); }
  device::StreamHandle create_stream() override;
  void destroy_stream(device::StreamHandle stream) override;
  void copy_async(void* dst, const void* src, std::size_t bytes,
                  device::StreamHandle stream) override;
  void host_func(device::StreamHandle stream, std::function<void()> fn) override;
  bool host_functions_may_block() const override { return true; }
  void synchronize(device::StreamHandle stream) override;

  device::EventHandle create_event() override;
  void destroy_event(device::EventHandle event) override;
  void record(device::EventHandle event, device::StreamHandle stream) override;
  void wait(device::StreamHandle stream, device::EventHandle event) override;
  bool query(device::EventHandle event) override;
  void synchronize_event(device::EventHandle event) override;

  void* host_alloc_pinned(std::size_t bytes) override;
  void host_free_pinned(void* ptr) override;
  void* error_words() override { return error_words_; }

  void begin_capture(device::StreamHandle stream) override;
  device::GraphHandle end_capture(device::StreamHandle stream) override;
  void launch_graph(device::GraphHandle graph, device::StreamHandle stream) override;
  void destroy_graph(device::GraphHandle graph) override;
  bool capturing() const override { return captures_.load() > 0; }
  bool is_capturing(device::StreamHandle stream) override { return queue(stream).capturing(); }

  void write_value32(void* addr, std::uint32_t value, device::StreamHandle stream) override;
  void wait_value32(void* addr, std::uint32_t value, device::StreamHandle stream) override;
  bool stream_memory_ops() override { return true; }

  std::string ipc_export(void* ptr) override;
  void* ipc_open(const std::string& handle) override;
  void ipc_close(void* ptr) override;

 private:
  int index_;
  std::size_t capacity_;
  alignas(16) std::uint64_t error_words_[2] = {0, 0};
  std::mutex memory_mutex_;
  std::size_t mapped_ = 0;
  struct Mapping {
    std::size_t bytes;
    int fd;  // the memfd behind it, kept open for ipc_open in other processes
  };
  std::unordered_map<void*, Mapping> mappings_;
  std::unordered_map<void*, std::size_t> opened_;  // peers' memory ipc_open mapped
  std::atomic<std::uint64_t> next_stream_{0};
  std::atomic<int> captures_{0};  // streams capturing now
  std::unique_ptr<StreamQueue> compute_;
  std::mutex streams_mutex_;
  std::set<StreamQueue*> streams_;  // those create_stream made and destroy_stream has not
  void drain_streams();             // every queued task has run (free's precondition)
};

}  // namespace ringlet::device::emu
