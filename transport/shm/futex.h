// Waiting across processes on shared memory: a process-shared futex on a 32-bit word, and the
// adaptive wait the shm ring and segment use (a few pauses, then yield, then sleep on the
// futex).
// Sleep/wake protocol (no lost wake-ups): a side about to sleep announces it (store flag,
// seq_cst fence, re-check the condition) and sleeps only if the futex word still holds the value
// read before the announcement; the other side publishes (store, seq_cst fence) and wakes only
// when it sees the announcement. One of the two always sees the other's store.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "transport/yield_window.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace ringlet::transport {

// Process-shared futex on a 32-bit word (works across processes on a MAP_SHARED mapping).
// wait returns when *word != expected, on a wake, or after timeout (spuriously too).
void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected,
                std::chrono::microseconds timeout);
void futex_wake_all(std::atomic<std::uint32_t>* word);

// Adaptive waiting. A few pauses catch a message already on its way without a system call;
// yielding then lets a co-scheduled peer run when cores are oversubscribed (4 ranks on 2 cores)
// and, with a core to spare, returns at once (one system call per look); the futex sleep then
// costs nothing while a side is idle. Spinning for 8 us before yielding was no faster with a
// core per rank and 2-2.6x slower at 4 and 8 ranks on 2 cores, where the spinning rank held the
// core the rank it waited for needed (bench/RESULTS.md, 2026-11-30 "Waiting"). The 40 us count
// only the time the waiter looked itself, not its neighbours' turns on its core (yield_window.h):
// at 4 ranks on 2 cores that took a 256 KiB ring from 207 us to 148 (bench/RESULTS.md,
// 2026-12-02 "Turns on a shared core").
constexpr int kSpins = 32;
constexpr auto kYieldTime = std::chrono::microseconds(40);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// Spins a few pauses, then yields, until ready() or the budget is spent; true if ready.
template <class Ready>
bool spin_then_yield(Ready ready) {
  for (int i = 0; i < kSpins; ++i) {
    if (ready()) return true;
    cpu_relax();
  }
  for (YieldWindow window(kYieldTime); window.open(); window.yield()) {
    if (ready()) return true;
  }
  return ready();
}

// Spins, yields, then sleeps on the futex word `seq`, announced through `sleeping` so the other
// side knows to wake it (the fence orders the announcement before the last check of ready()).
template <class Ready>
bool wait_until_ready(Ready ready, std::atomic<std::uint32_t>& seq,
                      std::atomic<std::uint32_t>& sleeping, std::chrono::microseconds max_wait) {
  if (spin_then_yield(ready)) return true;
  const std::uint32_t observed = seq.load(std::memory_order_acquire);
  sleeping.store(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!ready()) futex_wait(&seq, observed, max_wait);
  sleeping.store(0, std::memory_order_relaxed);
  return ready();
}

}  // namespace ringlet::transport
