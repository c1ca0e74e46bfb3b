// Limits shared by every program that starts ranks.
#pragma once

namespace ringlet::core {

// The most ranks (processes) one host runs for one job: `ringlet launch --nproc-per-node`,
// `ringlet train/eval --nproc` and the benchmarks' -np. Every rank holds its own buffers,
// shared-memory segments and threads, so the bound is checked before anything starts: a typo
// is an error, not a machine out of memory.
inline constexpr int kMaxLocalRanks = 256;

}  // namespace ringlet::core
