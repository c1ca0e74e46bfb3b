// tensor_loops_bench: tensor's flat loops (tensor/cpu/flat_loops.h: relu and its gradient,
// add, mul, batch norm's multiply-add and backward, the f32 <-> f16/bf16 conversions, the 2x2
// max pool) at every instruction-set level this CPU runs (core/isa.h). Per loop and size, the
// median over --reps of the mean time of back-to-back calls lasting about 2 ms, as effective GB/s
// (1 GB = 1e9 B; the bytes every operand moves once) and the speed-up over the baseline level.
// Every level's output is checked against the baseline's bits first. A size is the bytes of one f32
// operand.
//
// usage: tensor_loops_bench [--sizes 256K,64M] [--reps 15]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/kernel_bench_args.h"
#include "bench/program_main.h"
#include "core/env.h"
#include "core/error.h"
#include "core/isa.h"
#include "tensor/cpu/flat_loops.h"

using namespace ringlet;
using tensor::cpu::FlatLoops;

namespace {

struct Options {
  std::vector<std::size_t> sizes{256 << 10, 64 << 20};
  int reps = 15;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    RINGLET_CHECK(flag == "--sizes" || flag == "--reps", ValueError, "unknown flag '", flag, "'");
    RINGLET_CHECK(i + 1 < argc, ValueError, flag, " needs a value");
    const std::string value = argv[++i];
    if (flag == "--sizes") {
      o.sizes.clear();
      for (const auto& part : bench::split_commas(value)) {
        o.sizes.push_back(bench::parse_size(part));
        RINGLET_CHECK(o.sizes.back() >= 4, ValueError, "--sizes: '", part,
                      "' is less than one float (4 bytes)");
      }
    } else {
      o.reps = static_cast<int>(core::parse_int(value, "--reps"));
      RINGLET_CHECK(o.reps >= 1, ValueError, "--reps must be >= 1, not ", o.reps);
    }
  }
  return o;
}

// The pools' window positions in `out` after their n / 4 values (out holds n floats).
std::uint8_t* positions_after(float* values, std::int64_t n) {
  return reinterpret_cast<std::uint8_t*>(values + n / 4);
}

// Window positions for the pools' backward on n inputs, every one of the five (kNoGradient
// too) in turn: made on the first (untimed, baseline) call of a size, reused after.
const std::uint8_t* positions_for(std::int64_t n) {
  static std::vector<std::uint8_t> positions;
  if (positions.size() < static_cast<std::size_t>(n / 4)) {
    positions.resize(static_cast<std::size_t>(n / 4));
    for (std::size_t i = 0; i < positions.size(); ++i) positions[i] = (i * 3) % 5;
  }
  return positions.data();
}

// One loop of a table on n elements: its name, the bytes it moves, and a call writing `out`.
struct Loop {
  const char* name;
  double bytes_per_element;
  void (*call)(const FlatLoops& t, void* out, const void* a, const void* b, std::int64_t n);
};

const Loop kLoops[] = {
    {"relu", 8,
     [](const FlatLoops& t, void* o, const void* a, const void*, std::int64_t n) {
       t.relu[0](o, a, n);
     }},
    {"relu_grad", 12,
     [](const FlatLoops& t, void* o, const void* a, const void* b, std::int64_t n) {
       t.relu_grad[0](o, a, b, n);
     }},
    {"add", 12,
     [](const FlatLoops& t, void* o, const void* a, const void* b, std::int64_t n) {
       t.arithmetic[0][0](o, a, b, n);
     }},
    {"mul", 12,
     [](const FlatLoops& t, void* o, const void* a, const void* b, std::int64_t n) {
       t.arithmetic[0][2](o, a, b, n);
     }},
    {"affine", 8,
     [](const FlatLoops& t, void* o, const void* a, const void*, std::int64_t n) {
       t.affine[0](o, a, n, 0.75, -0.5);
     }},
    {"f32_to_f16", 6,
     [](const FlatLoops& t, void* o, const void* a, const void*, std::int64_t n) {
       t.f32_to_f16(o, a, n);
     }},
    {"f16_to_f32", 6,
     [](const FlatLoops& t, void* o, const void* a, const void*, std::int64_t n) {
       t.f16_to_f32(o, a, n);
     }},
    {"f32_to_bf16", 6,
     [](const FlatLoops& t, void* o, const void* a, const void*, std::int64_t n) {
       t.f32_to_bf16(o, a, n);
     }},
    {"bf16_to_f32", 6,
     [](const FlatLoops& t, void* o, const void* a, const void*, std::int64_t n) {
       t.bf16_to_f32(o, a, n);
     }},
    // Batch norm's backward: sum dy and sum dy * (x - mean) (the results' 16 bytes in out),
    // and dx.
    {"norm_sums_dy", 8,
     [](const FlatLoops& t, void* o, const void* a, const void* b, std::int64_t n) {
       double sums[2];
       t.sums_dy[0](a, b, n, 0.25, &sums[0], &sums[1]);
       if (n >= 4) std::memcpy(o, sums, sizeof sums);
     }},
    {"norm_grad", 12,
     [](const FlatLoops& t, void* o, const void* a, const void* b, std::int64_t n) {
       t.norm_grad[0](o, a, b, n, 0.75, -0.375, 0.125, 2.5);
     }},
    // a as rows of 28, then of 14 (fmnist_cnn's two pools), into rows half as wide.
    // (bytes: each input read, a quarter as many values and positions written)
    {"max_pool_28", 5.25,
     [](const FlatLoops& t, void* o, const void* a, const void*, std::int64_t n) {
       auto* values = static_cast<float*>(o);
       t.max_pool_2x2[0](a, 28, n / 56, 14, false, values, positions_after(values, n));
     }},
    {"max_pool_14", 5.25,
     [](const FlatLoops& t, void* o, const void* a, const void*, std::int64_t n) {
       auto* values = static_cast<float*>(o);
       t.max_pool_2x2[0](a, 14, n / 28, 7, false, values, positions_after(values, n));
     }},
    // Their backward: n gradients written from n / 4 of a and their positions.
    {"unpool_28", 5.25,
     [](const FlatLoops& t, void* o, const void* a, const void*, std::int64_t n) {
       t.max_unpool_2x2[0](o, n / 28, 28, a, positions_for(n));
     }},
    {"unpool_14", 5.25,
     [](const FlatLoops& t, void* o, const void* a, const void*, std::int64_t n) {
       t.max_unpool_2x2[0](o, n / 14, 14, a, positions_for(n));
     }},
};

// Values in [-2, 2): finite as f32 and as 16 bits, half of them negative (relu's select).
std::vector<float> inputs(std::size_t n, int period) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % period) / period * 4 - 2;
  return v;
}

void bench_point(const Loop& loop, std::size_t bytes, int reps) {
  const std::size_t n = bytes / 4;
  const std::vector<float> a = inputs(n, 97), b = inputs(n, 89);
  std::vector<float> want(n), got(n);
  const FlatLoops& base = tensor::cpu::flat_loops(core::Isa::baseline);
  loop.call(base, want.data(), a.data(), b.data(), static_cast<std::int64_t>(n));
  double baseline_gbps = 0;
  for (const core::Isa isa : core::supported_isas()) {
    const FlatLoops& table = tensor::cpu::flat_loops(isa);
    std::fill(got.begin(), got.end(), 0.0f);
    loop.call(table, got.data(), a.data(), b.data(), static_cast<std::int64_t>(n));
    RINGLET_CHECK(std::memcmp(want.data(), got.data(), n * 4) == 0, Error, core::isa_name(isa), " ",
                  loop.name, " differs from the baseline's bits");
    const double seconds = bench::time_per_call(reps, [&] {
      loop.call(table, got.data(), a.data(), b.data(), static_cast<std::int64_t>(n));
    });
    const double gbps = loop.bytes_per_element * static_cast<double>(n) / seconds / 1e9;
    if (isa == core::Isa::baseline) baseline_gbps = gbps;
    const std::string isa_name(core::isa_name(isa));
    std::printf("  %12zu %12s %9s %10.2f %9.2f\n", bytes, loop.name, isa_name.c_str(), gbps,
                gbps / baseline_gbps);
    std::printf("%s\n", nlohmann::json{{"bench", "tensor_loops_bench"},
                                       {"bytes", bytes},
                                       {"loop", loop.name},
                                       {"isa", isa_name},
                                       {"gbps", gbps},
                                       {"vs_baseline", gbps / baseline_gbps}}
                            .dump()
                            .c_str());
  }
}

int run(const Options& o) {
  bench::print_isa_levels();
  std::printf("# %12s %12s %9s %10s %9s\n", "bytes", "loop", "isa", "GB/s", "x base");
  for (const Loop& loop : kLoops) {
    for (const std::size_t bytes : o.sizes) bench_point(loop, bytes, o.reps);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ringlet::bench::program_main("tensor_loops_bench",
                                      "usage: tensor_loops_bench [--sizes 256K,64M] [--reps 15]\n",
                                      argc, argv, parse, run);
}
