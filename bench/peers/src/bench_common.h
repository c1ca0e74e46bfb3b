// Shared methodology for the C++ all-reduce benchmarks (Gloo, MPI).
//
// Every peer benchmark follows the same recipe:
//   1. correctness check: rank r fills element i of its input with (r+1) + 0.5*(i%251);
//      after one SUM all-reduce every element of its output must equal exactly
//      n(n+1)/2 + n*0.5*(i%251) (all values are exactly representable).
//   2. warm-up: W iterations on a zero-filled buffer (W depends on size).
//   3. calibration: iters = ceil(min_time / t_warmup_per_op), clamped to
//      [min_iters, max_iters], agreed across ranks with a MAX all-reduce.
//   4. timed loop: barrier, then `iters` back-to-back all-reduces on the
//      zero-filled buffer (zeros keep values finite; no library special-cases
//      them). Per-rank elapsed time is MAX-reduced across ranks.
//   5. correctness check again (pattern refill, one op, exact compare).
// Reported: us/op = max_elapsed / iters, algbw = bytes / t (1 GB = 1e9 B),
// busbw = algbw * 2(n-1)/n (nccl-tests definition).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace bench {

inline double now_s() {
  using clk = std::chrono::steady_clock;
  return std::chrono::duration<double>(clk::now().time_since_epoch()).count();
}

// Wall-clock seconds since the epoch: when a timed loop ran, for matching it with the CPU
// placement samples bench/core_probe takes beside it (the "# span" line before each row).
inline double unix_s() {
  using clk = std::chrono::system_clock;
  return std::chrono::duration<double>(clk::now().time_since_epoch()).count();
}

inline void fill_pattern(float* p, size_t n, int rank) {
  for (size_t i = 0; i < n; ++i) p[i] = float(rank + 1) + 0.5f * float(i % 251);
}

// Returns the number of elements that differ from the expected sum.
inline long check_pattern(const float* p, size_t n, int world) {
  long bad = 0;
  const float base = float(world * (world + 1) / 2);
  for (size_t i = 0; i < n; ++i) {
    float want = base + float(world) * 0.5f * float(i % 251);
    if (p[i] != want) ++bad;
  }
  return bad;
}

inline int warmup_iters(size_t bytes) {
  if (bytes <= (1u << 20)) return 20;
  return 3;
}

inline long calibrate_iters(double per_op_s, double min_time_s) {
  long it = (long)std::ceil(min_time_s / std::max(per_op_s, 1e-9));
  if (it < 5) it = 5;
  if (it > 2000000) it = 2000000;
  return it;
}

inline std::vector<size_t> default_sizes() { return {4096, 65536, 1u << 20, 16u << 20, 64u << 20}; }

inline std::vector<size_t> parse_sizes(const std::string& s) {
  std::vector<size_t> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    out.push_back(std::strtoull(s.substr(pos, comma - pos).c_str(), nullptr, 10));
    pos = comma + 1;
  }
  return out;
}

inline std::string human_bytes(size_t b) {
  char buf[32];
  if (b >= (1u << 20))
    std::snprintf(buf, sizeof buf, "%zu MiB", b >> 20);
  else if (b >= 1024)
    std::snprintf(buf, sizeof buf, "%zu KiB", b >> 10);
  else
    std::snprintf(buf, sizeof buf, "%zu B", b);
  return buf;
}

struct CaseResult {
  long iters = 0;
  double per_op_s = 0;
  double bad = 0;                       // mismatching elements (max over ranks), must be 0
  double span_start = 0, span_end = 0;  // unix_s() around the reported timed loop (rank's own)
};

// Runs steps 1-5 above for one (algorithm, size). `op` performs one all-reduce of
// in[0..n) into out[0..n) (in place: in == out); `barrier` and `agree_max` are collective helpers
// built on the same library. If the timed loop ends up shorter than
// min_time (warm-up estimate too pessimistic), it is re-run with more
// iterations (at most 3 attempts); the last attempt is reported.
template <class Op, class Barrier, class AgreeMax>
CaseResult run_case(float* in, float* out, size_t n, int rank, int world, double min_time, Op&& op,
                    Barrier&& barrier, AgreeMax&& agree_max) {
  CaseResult r;
  const size_t bytes = n * sizeof(float);
  fill_pattern(in, n, rank);
  op();
  r.bad = (double)check_pattern(out, n, world);

  std::memset(in, 0, bytes);
  std::memset(out, 0, bytes);
  const int w = warmup_iters(bytes);
  barrier();
  double t0 = now_s();
  for (int i = 0; i < w; ++i) op();
  double per_op = agree_max(now_s() - t0) / w;

  long iters = calibrate_iters(per_op, min_time);
  double elapsed = 0;
  for (int attempt = 0; attempt < 3; ++attempt) {
    iters = (long)agree_max((double)iters);
    barrier();
    r.span_start = unix_s();
    t0 = now_s();
    for (long i = 0; i < iters; ++i) op();
    r.span_end = unix_s();
    elapsed = agree_max(now_s() - t0);
    if (elapsed >= min_time || attempt == 2) break;  // iters stays the count that ran
    iters = calibrate_iters(elapsed / iters, min_time * 1.1);
  }
  r.iters = iters;
  r.per_op_s = elapsed / iters;

  fill_pattern(in, n, rank);
  if (out != in) std::memset(out, 0, bytes);  // the result must be written, not left over
  op();
  r.bad += (double)check_pattern(out, n, world);
  r.bad = agree_max(r.bad);
  return r;
}

inline void print_header(const char* peer) {
  std::printf("%-8s %-14s %3s %8s %8s %12s %12s %12s %s\n", "peer", "algo", "np", "size", "iters",
              "time_us", "algbw_GB/s", "busbw_GB/s", "check");
}

// The row of one result, after a "# span <start> <end>" line with when its timed loop ran.
inline void print_row(const char* peer, const char* algo, int np, size_t bytes,
                      const CaseResult& res, bool ok) {
  const long iters = res.iters;
  const double t_per_op_s = res.per_op_s;
  std::printf("# span %.3f %.3f\n", res.span_start, res.span_end);
  double algbw = double(bytes) / t_per_op_s / 1e9;
  double busbw = algbw * 2.0 * (np - 1) / np;
  std::printf("%-8s %-14s %3d %8s %8ld %12.1f %12.3f %12.3f %s\n", peer, algo, np,
              human_bytes(bytes).c_str(), iters, t_per_op_s * 1e6, algbw, busbw,
              ok ? "OK" : "FAIL");
  std::fflush(stdout);
}

}  // namespace bench
