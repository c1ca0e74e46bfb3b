// store_barrier: every rank adds 1 to "<name>/count"; the rank that brings it to world_size
// sets "<name>/done", which all ranks wait for. Two keys per barrier and no polling; names
// must be unique per use because the keys are never reset.
#include "transport/store.h"

#include "core/error.h"

namespace ringlet::transport {

std::unique_ptr<Store> Store::another_client(std::chrono::milliseconds) const { return nullptr; }

std::string Store::address() const { return {}; }

void store_barrier(Store& store, const std::string& name, int world_size, core::Deadline deadline) {
  RINGLET_CHECK(world_size >= 1, ValueError, "store_barrier('", name, "'): world_size ", world_size,
                " must be >= 1");
  const std::string count_key = name + "/count";
  const std::string done_key = name + "/done";
  const std::int64_t arrived = store.add(count_key, 1);
  RINGLET_CHECK(arrived <= world_size, ValueError, "store_barrier('", name, "'): ", arrived,
                " arrivals for world_size ", world_size, " (is the barrier name reused?)");
  if (arrived == world_size) store.set(done_key, "1");
  try {
    store.wait({done_key}, deadline);
  } catch (const core::TimeoutError& e) {
    // Say how many ranks made it: that tells a hung rank from a slow one.
    std::int64_t now = -1;
    try {
      now = store.add(count_key, 0);
    } catch (const core::Error&) {
    }
    RINGLET_THROW(TimeoutError, "store_barrier('", name, "'): only ", now, " of ", world_size,
                  " ranks arrived before the deadline: ", e.what());
  }
}

}  // namespace ringlet::transport
