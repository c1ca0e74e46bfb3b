// PageBuffer: host memory that starts at a 4 KiB page, its pages touched. Where a measurement
// copies between two buffers, the gap between them modulo a page decides glibc's memcpy speed on
// some x86 cores (core/copy.h); buffers from malloc sit 16 bytes into a page or at one depending
// on how the heap grew before, so two of them can measure 2 GB/s or 30 for the same copy. Two page
// buffers have a gap of 0.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>

namespace ringlet::core {

constexpr std::size_t kPageBytes = 4096;

class PageBuffer {
 public:
  PageBuffer() = default;
  // `bytes` (rounded up to whole pages) starting at a page, every byte set to `fill`.
  PageBuffer(std::size_t bytes, char fill);

  char* data() const { return memory_.get(); }
  std::size_t size() const { return bytes_; }  // the bytes asked for

 private:
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> memory_;
  std::size_t bytes_ = 0;
};

}  // namespace ringlet::core
