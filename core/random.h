// Fresh randomness for identifiers that must differ between runs (job tokens, nonces): drawn
// from std::random_device, never from a seeded generator, so two jobs started in the same
// second on the same machine still disagree. Not for anything that must be reproducible.
#pragma once

#include <cstdint>

namespace ringlet::core {

// 64 random bits: two 32-bit std::random_device draws. Thread-safe.
std::uint64_t random_u64();

}  // namespace ringlet::core
