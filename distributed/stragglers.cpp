// The wait tally's all-gather and the straggler test (stragglers.h).
#include "distributed/stragglers.h"

#include <algorithm>
#include <cstdio>

namespace ringlet::distributed {

void WaitTally::add(std::chrono::steady_clock::duration wait, double step_ms) {
  wait_ms_ += std::chrono::duration<double, std::milli>(wait).count();
  step_ms_ += step_ms;
  ++steps_;
}

Waits WaitTally::waited_for(collectives::Communicator* comm, core::Deadline deadline) {
  if (comm == nullptr || comm->size() == 1) return {};
  constexpr std::size_t kFields = 3;
  const double mine[kFields] = {wait_ms_, step_ms_, static_cast<double>(steps_)};
  wait_ms_ = step_ms_ = 0;
  steps_ = 0;
  std::vector<double> all(kFields * static_cast<std::size_t>(comm->size()));
  comm->all_gather(mine, all.data(), kFields, core::DType::f64)->wait(deadline);
  double longest = 0;
  for (std::size_t r = 0; r < all.size(); r += kFields) longest = std::max(longest, all[r]);
  Waits waits;
  for (std::size_t r = 0; r < all.size(); r += kFields) {
    const double steps = all[r + 2];
    if (steps <= 0) return {};  // a rank that counted no step: nothing to compare
    waits.waited_for_ms.push_back((longest - all[r]) / steps);
    waits.step_ms += all[r + 1] / steps / static_cast<double>(comm->size());
  }
  return waits;
}

std::optional<Straggler> find_straggler(const std::vector<double>& waited_ms, double step_ms,
                                        double share) {
  if (waited_ms.empty() || !(step_ms > 0)) return std::nullopt;
  const auto slowest = std::max_element(waited_ms.begin(), waited_ms.end());
  const double part = *slowest / step_ms;
  if (!(part > share)) return std::nullopt;
  return Straggler{static_cast<int>(slowest - waited_ms.begin()), *slowest, part};
}

std::string straggler_text(const Straggler& s, double step_ms) {
  char text[160];
  std::snprintf(text, sizeof text,
                "straggler: rank %d keeps the others waiting %.1f ms of a %.1f ms step (%.0f%%)",
                s.rank, s.waited_ms, step_ms, 100 * s.share);
  return text;
}

}  // namespace ringlet::distributed
