// Every rank's step split: one all-gather of five numbers per rank, and how to show them.
#include "distributed/rank_times.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

namespace ringlet::distributed {

namespace {

constexpr std::size_t kFields = 5;

nlohmann::json number_or_null(double v) {
  if (std::isnan(v)) return nullptr;
  return v;
}

}  // namespace

std::vector<core::TimeSplit> gather_splits(collectives::Communicator* comm,
                                           const core::TimeSplit& mine, core::Deadline deadline) {
  if (comm == nullptr || comm->size() == 1) return {mine};
  const double send[kFields] = {mine.wall_ms, mine.computing_ms, mine.preempted_ms, mine.blocked_ms,
                                mine.other_threads_ms};
  std::vector<double> all(kFields * static_cast<std::size_t>(comm->size()));
  comm->all_gather(send, all.data(), kFields, core::DType::f64)->wait(deadline);
  std::vector<core::TimeSplit> ranks;
  for (std::size_t r = 0; r < all.size(); r += kFields) {
    ranks.push_back({all[r], all[r + 1], all[r + 2], all[r + 3], all[r + 4]});
  }
  return ranks;
}

nlohmann::json splits_json(const std::vector<core::TimeSplit>& ranks) {
  nlohmann::json out = nlohmann::json::array();
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const core::TimeSplit& s = ranks[r];
    out.push_back({{"rank", r},
                   {"wall_ms", s.wall_ms},
                   {"computing_ms", s.computing_ms},
                   {"preempted_ms", number_or_null(s.preempted_ms)},
                   {"blocked_ms", s.blocked_ms},
                   {"other_threads_ms", s.other_threads_ms}});
  }
  return out;
}

std::string describe_splits(const std::vector<core::TimeSplit>& ranks) {
  if (ranks.empty()) return "";
  const auto range = [&](double core::TimeSplit::*field) {
    const auto [low, high] =
        std::minmax_element(ranks.begin(), ranks.end(),
                            [&](const auto& a, const auto& b) { return a.*field < b.*field; });
    std::ostringstream text;
    text << std::fixed << std::setprecision(2) << (*low).*field;
    if (ranks.size() > 1) text << "-" << (*high).*field;
    return std::make_pair(text.str() + " ms", high - ranks.begin());
  };
  double step = 0;
  bool preempted_known = true;
  for (const auto& s : ranks) {
    step += s.wall_ms;
    preempted_known = preempted_known && !std::isnan(s.preempted_ms);
  }
  const auto [computing, slowest] = range(&core::TimeSplit::computing_ms);
  std::ostringstream text;
  text << std::fixed << std::setprecision(2) << "a step "
       << step / static_cast<double>(ranks.size()) << " ms: computing " << computing;
  if (ranks.size() > 1) text << " (rank " << slowest << " the slowest)";
  if (preempted_known) text << ", preempted " << range(&core::TimeSplit::preempted_ms).first;
  text << ", blocked " << range(&core::TimeSplit::blocked_ms).first;
  return text.str();
}

}  // namespace ringlet::distributed
