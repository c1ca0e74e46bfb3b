// Helpers for collectives tests: N ranks as threads, each with a Communicator over the real
// transports and a shared MemoryStore; typed element access for integer-valued test data.
#pragma once

#include <doctest/doctest.h>

#include <cstring>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

#include "collectives/communicator.h"
#include "memory_store.h"
#include "mesh_ranks.h"

namespace ringlet::testing {

using collectives::CommOptions;
using collectives::Communicator;

// Runs body(rank, comm) on `world` threads, rank r's mesh set up by mesh_of(r) and its
// communicator by options_of(r).
inline void run_comm_ranks(int world, const std::function<transport::MeshOptions(int)>& mesh_of,
                           const std::function<CommOptions(int)>& options_of,
                           const std::function<void(int, Communicator&)>& body) {
  MemoryStore store;
  std::vector<std::exception_ptr> errors(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto comm =
            Communicator::create(store, mesh_of(r), options_of(r), core::Deadline::after(60s));
        body(r, *comm);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

// The same with one CommOptions for every rank.
inline void run_comm_meshes(int world, const std::function<transport::MeshOptions(int)>& mesh_of,
                            CommOptions options,
                            const std::function<void(int, Communicator&)>& body) {
  run_comm_ranks(
      world, mesh_of, [&](int) { return options; }, body);
}

inline void run_comm(int world, const std::string& transport, CommOptions options,
                     const std::function<void(int, Communicator&)>& body) {
  run_comm_meshes(
      world, [&](int r) { return mesh_options(r, world, transport, "m"); }, options, body);
}

// Ranks on simulated hosts: rank r says it is on host host_of[r] (MeshOptions::host_id), so
// ranks of one host connect over shm and the others over tcp, as on separate machines.
inline void run_comm_on_hosts(const std::vector<std::string>& host_of, CommOptions options,
                              const std::function<void(int, Communicator&)>& body) {
  const int world = static_cast<int>(host_of.size());
  run_comm_meshes(
      world,
      [&](int r) {
        transport::MeshOptions o = mesh_options(r, world, "auto", "m");
        o.host_id = host_of[r];
        return o;
      },
      options, body);
}

// A host buffer of `count` elements of `dtype`, read and written as doubles.
struct TypedBuffer {
  core::DType dtype;
  std::vector<char> bytes;
  TypedBuffer(core::DType d, std::size_t count) : dtype(d), bytes(count * core::dtype_size(d)) {}
  std::size_t size() const { return bytes.size() / core::dtype_size(dtype); }
  void* data() { return bytes.data(); }
  void set(std::size_t i, double v) {
    char* p = bytes.data() + i * core::dtype_size(dtype);
    switch (dtype) {
      case core::DType::f32: {
        float f = static_cast<float>(v);
        std::memcpy(p, &f, 4);
        break;
      }
      case core::DType::f64: std::memcpy(p, &v, 8); break;
      case core::DType::f16: {
        auto h = core::float_to_half(static_cast<float>(v));
        std::memcpy(p, &h, 2);
        break;
      }
      case core::DType::bf16: {
        auto h = core::float_to_bf16(static_cast<float>(v));
        std::memcpy(p, &h, 2);
        break;
      }
      case core::DType::i32: {
        auto x = static_cast<std::int32_t>(v);
        std::memcpy(p, &x, 4);
        break;
      }
      case core::DType::i64: {
        auto x = static_cast<std::int64_t>(v);
        std::memcpy(p, &x, 8);
        break;
      }
      case core::DType::u8: {
        auto x = static_cast<std::uint8_t>(v);
        std::memcpy(p, &x, 1);
        break;
      }
    }
  }
  double get(std::size_t i) const {
    const char* p = bytes.data() + i * core::dtype_size(dtype);
    switch (dtype) {
      case core::DType::f32: {
        float f;
        std::memcpy(&f, p, 4);
        return f;
      }
      case core::DType::f64: {
        double d;
        std::memcpy(&d, p, 8);
        return d;
      }
      case core::DType::f16: {
        std::uint16_t h;
        std::memcpy(&h, p, 2);
        return core::half_to_float(h);
      }
      case core::DType::bf16: {
        std::uint16_t h;
        std::memcpy(&h, p, 2);
        return core::bf16_to_float(h);
      }
      case core::DType::i32: {
        std::int32_t x;
        std::memcpy(&x, p, 4);
        return x;
      }
      case core::DType::i64: {
        std::int64_t x;
        std::memcpy(&x, p, 8);
        return static_cast<double>(x);
      }
      case core::DType::u8: return static_cast<unsigned char>(*p);
    }
    return 0;
  }
};

}  // namespace ringlet::testing
