// copy_gap_bench: memcpy against core::copy and core::copy_bytes (core/copy.h) by the gap between
// destination and source modulo a 4 KiB page. glibc's memcpy copies from about 2 KiB up to about
// a core's own cache with `rep movsb`, which on some x86 cores (the AMD EPYC measured here, FSRM)
// crawls where the destination lies a few bytes past the source modulo a page; core::copy takes a
// vector loop there where its probe finds memcpy crawling (the first line says). Per size and gap:
// the median over --reps of the mean time of back-to-back copies lasting about 2 ms, in GB/s of
// bytes copied (1 GB = 1e9 B), and core::copy / memcpy. Each copy is checked against its source
// first.
//
// usage: copy_gap_bench [--sizes 4K,64K,256K,1M] [--gaps 0,8,16,24,32,64,2048] [--reps 15]
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/kernel_bench_args.h"
#include "bench/program_main.h"
#include "core/copy.h"
#include "core/env.h"
#include "core/error.h"
#include "core/page_buffer.h"

using namespace ringlet;

namespace {

constexpr std::size_t kPage = core::kPageBytes;

struct Options {
  std::vector<std::size_t> sizes{4 << 10, 64 << 10, 256 << 10, 1 << 20};
  std::vector<std::size_t> gaps{0, 8, 16, 24, 32, 64, 2048};
  int reps = 15;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    RINGLET_CHECK(flag == "--sizes" || flag == "--gaps" || flag == "--reps", ValueError,
                  "unknown flag '", flag, "'");
    RINGLET_CHECK(i + 1 < argc, ValueError, flag, " needs a value");
    const std::string value = argv[++i];
    if (flag == "--reps") {
      o.reps = static_cast<int>(core::parse_int(value, "--reps"));
      RINGLET_CHECK(o.reps >= 1, ValueError, "--reps must be >= 1, not ", o.reps);
      continue;
    }
    auto& list = flag == "--sizes" ? o.sizes : o.gaps;
    list.clear();
    for (const auto& part : bench::split_commas(value)) list.push_back(bench::parse_size(part));
    if (flag == "--sizes") {
      for (const std::size_t s : list) {
        RINGLET_CHECK(s >= 1 && s <= (std::size_t{1} << 30), ValueError, "--sizes: ", s,
                      " is not within 1 B - 1 GiB");
      }
    } else {
      for (const std::size_t g : list) {
        RINGLET_CHECK(g < kPage, ValueError, "--gaps: ", g, " is not below a page (4096)");
      }
    }
  }
  return o;
}

template <class Copy>
double gbps(std::size_t bytes, int reps, char* dst, const char* src, Copy copy) {
  std::memset(dst, 0, bytes);
  copy(dst, src, bytes);
  RINGLET_CHECK(std::memcmp(dst, src, bytes) == 0, Error, "a copy of ", bytes,
                " bytes differs from its source");
  return static_cast<double>(bytes) / bench::time_per_call(reps, [&] { copy(dst, src, bytes); }) /
         1e9;
}

void bench_point(std::size_t bytes, std::size_t gap, int reps) {
  const core::PageBuffer src(bytes, 1), dst(bytes + gap, 2);
  char* to = dst.data() + gap;
  const double libc = gbps(bytes, reps, to, src.data(), std::memcpy);
  const double ours = gbps(bytes, reps, to, src.data(), core::copy);
  const double loop = gbps(bytes, reps, to, src.data(), core::copy_bytes);
  std::printf("  %10zu %6zu %12.2f %12.2f %12.2f %8.2f\n", bytes, gap, libc, ours, loop,
              ours / libc);
  std::printf("%s\n", nlohmann::json{{"bench", "copy_gap_bench"},
                                     {"bytes", bytes},
                                     {"gap", gap},
                                     {"memcpy_gbps", libc},
                                     {"copy_gbps", ours},
                                     {"copy_bytes_gbps", loop}}
                          .dump()
                          .c_str());
}

int run(const Options& o) {
  std::printf("# GB/s copied; gap: (destination - source) modulo 4096\n");
  std::printf("# core::copy's probe: memcpy %s at a gap of 1-63 bytes on this CPU\n",
              core::memcpy_crawls_at_a_gap() ? "crawls (the loop there)" : "does not crawl");
  std::printf("# %10s %6s %12s %12s %12s %8s\n", "bytes", "gap", "memcpy", "core::copy",
              "copy_bytes", "ratio");
  for (const std::size_t bytes : o.sizes) {
    for (const std::size_t gap : o.gaps) bench_point(bytes, gap, o.reps);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ringlet::bench::program_main(
      "copy_gap_bench",
      "usage: copy_gap_bench [--sizes 4K,64K,256K,1M] [--gaps 0,8,16,24,32,64,2048] [--reps "
      "15]\n",
      argc, argv, parse, run);
}
