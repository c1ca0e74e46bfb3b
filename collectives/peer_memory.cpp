// Agreement on peer memory access: the yes/no round and the shared windows.
#include "collectives/peer_memory.h"

#include "core/error.h"
#include "core/log.h"

namespace ringlet::collectives {
namespace {

// Creates this rank's window and publishes its address (empty when it could not); returns why
// it could not, or "".
std::string create_own(transport::Store& store, const std::string& key, int rank, std::size_t bytes,
                       SharedWindows& out) {
  try {
    out.owned.push_back(transport::SharedWindow::create(bytes));
    out.mapped[rank] = out.owned.back().data();
    store.set(key + "at/" + std::to_string(rank), out.owned.back().address());
    return "";
  } catch (const std::exception& e) {
    store.set(key + "at/" + std::to_string(rank), "");
    return e.what();
  }
}

// Maps every peer's window; returns why one could not be mapped, or "". Reads every peer's
// address even after a problem, so no rank is left waiting on this one's reads.
std::string map_peers(transport::Store& store, const std::string& key, int rank, int size,
                      core::Deadline deadline, std::string problem, SharedWindows& out) {
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    const std::string address = store.get(key + "at/" + std::to_string(p), deadline);
    if (!problem.empty()) continue;
    if (address.empty()) {
      problem = core::str("rank ", p, " has no window");
      continue;
    }
    try {
      out.owned.push_back(transport::SharedWindow::open(address));
      out.mapped[p] = out.owned.back().data();
    } catch (const std::exception& e) {
      problem = core::str("rank ", p, "'s: ", e.what());
    }
  }
  return problem;
}

}  // namespace

bool all_ranks_agree(transport::Store& store, const std::string& key, int rank, int size, bool mine,
                     core::Deadline deadline) {
  store.set(key + std::to_string(rank), mine ? "1" : "0");
  bool all = mine;
  for (int p = 0; p < size; ++p) {
    if (p != rank) all = store.get(key + std::to_string(p), deadline) == "1" && all;
  }
  return all;
}

SharedWindows setup_shared_windows(transport::Store& store, const std::string& key, int rank,
                                   int size, std::size_t bytes, core::Deadline deadline) {
  SharedWindows out;
  out.mapped.assign(static_cast<std::size_t>(size), nullptr);
  std::string problem = create_own(store, key, rank, bytes, out);
  problem = map_peers(store, key, rank, size, deadline, problem, out);
  const bool all = all_ranks_agree(store, key + "ok/", rank, size, problem.empty(), deadline);
  // Every rank has mapped (or given up): the descriptor peers opened the window through goes.
  if (!out.owned.empty() && problem.empty()) out.owned.front().close_handle();
  if (!problem.empty()) {
    core::log(core::LogLevel::info, "rank ", rank, ": no shared windows: ", problem);
  }
  if (!all) return SharedWindows{};
  out.bytes = bytes;
  return out;
}

}  // namespace ringlet::collectives
