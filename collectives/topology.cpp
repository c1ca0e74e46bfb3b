// Grouping ranks by host.
#include "collectives/topology.h"

#include <map>

#include "core/error.h"

namespace ringlet::collectives {

Topology::Topology(const std::vector<std::string>& host_of) : host_index_(host_of.size()) {
  std::map<std::string, int> index;  // identity -> host, numbered in order of first rank
  for (std::size_t r = 0; r < host_of.size(); ++r) {
    auto [it, added] = index.emplace(host_of[r], static_cast<int>(hosts_.size()));
    if (added) hosts_.emplace_back();
    hosts_[it->second].push_back(static_cast<int>(r));
    host_index_[r] = it->second;
  }
}

bool Topology::regular() const {
  if (hosts_.size() < 2 || hosts_[0].size() < 2) return false;
  for (const auto& ranks : hosts_) {
    if (ranks.size() != hosts_[0].size()) return false;
  }
  return true;
}

const std::vector<int>& Topology::local_ranks(int rank) const {
  RINGLET_CHECK(rank >= 0 && rank < static_cast<int>(host_index_.size()), ValueError,
                "topology: no rank ", rank, " among ", host_index_.size());
  return hosts_[host_index_[rank]];
}

int Topology::local_index(int rank) const {
  const std::vector<int>& local = local_ranks(rank);
  for (std::size_t i = 0; i < local.size(); ++i) {
    if (local[i] == rank) return static_cast<int>(i);
  }
  return -1;  // unreachable: rank is on its own host
}

std::vector<int> Topology::cross_ranks(int rank) const {
  RINGLET_CHECK(regular(), ValueError, "topology: ", describe(),
                " has no cross-host rings (it needs the same number, at least 2, on every host)");
  const int i = local_index(rank);
  std::vector<int> ranks;
  for (const auto& host : hosts_) ranks.push_back(host[i]);
  return ranks;
}

std::string Topology::describe() const {
  if (regular() || hosts_.size() == 1) {
    return core::str(hosts_.size(), hosts_.size() == 1 ? " host x " : " hosts x ",
                     hosts_.empty() ? 0 : hosts_[0].size(), " rank(s)");
  }
  std::string counts;
  for (const auto& ranks : hosts_)
    counts += (counts.empty() ? "" : "+") + std::to_string(ranks.size());
  return core::str(hosts_.size(), " hosts: ", counts, " ranks");
}

}  // namespace ringlet::collectives
