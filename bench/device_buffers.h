// DeviceBuffers: the collective benchmarks' device memory, mirroring the host buffers the
// harness fills and checks (filled, then copied up; run on the device; copied down, then
// checked).
#pragma once

#include <cstddef>

#include "core/error.h"
#include "device/runtime.h"
#include "device/stream.h"

namespace ringlet::bench {

struct DeviceBuffers {
  core::Device device;
  device::Runtime& rt;
  char* send;
  char* recv;
  std::size_t bytes;
  DeviceBuffers(core::Device d, std::size_t b)
      : device(d),
        rt(device::runtime(d)),
        send(static_cast<char*>(rt.malloc(b))),
        recv(static_cast<char*>(rt.malloc(b))),
        bytes(b) {
    RINGLET_CHECK(send != nullptr && recv != nullptr, OutOfMemoryError, d, ": ", b,
                  " bytes twice for the benchmark's buffers are not free");
  }
  ~DeviceBuffers() {
    rt.free(send);
    rt.free(recv);
  }
  void blocking_copy(void* dst, const void* src, std::size_t n) {
    const auto stream = device::current_stream(device);
    rt.copy_async(dst, src, n, stream.handle());
    rt.synchronize(stream.handle());
  }
};

}  // namespace ringlet::bench
