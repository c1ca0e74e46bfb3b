// Topology: which ranks share a host, from the host identities the ranks published when their
// mesh connected (transport::Mesh::host_of). Every rank computes the same groups from the same
// records, so every rank makes the same choice of algorithm.
//
// The hierarchical all-reduce needs a regular shape: at least two hosts, the same number (at
// least two) of ranks on each. Hosts are ordered by their lowest rank, a host's ranks by rank;
// a rank's "local index" is its position on its host.
#pragma once

#include <string>
#include <vector>

namespace ringlet::collectives {

class Topology {
 public:
  // host_of[r]: rank r's host identity.
  explicit Topology(const std::vector<std::string>& host_of);

  int hosts() const { return static_cast<int>(hosts_.size()); }
  // Several hosts with the same number of ranks, at least two, on each.
  bool regular() const;
  // The ranks on `rank`'s host, in rank order.
  const std::vector<int>& local_ranks(int rank) const;
  // rank's position among local_ranks(rank).
  int local_index(int rank) const;
  // The rank of the same local index on every host, in host order (regular() only).
  std::vector<int> cross_ranks(int rank) const;
  // "2 hosts x 2 ranks", or the ranks per host ("3 hosts: 2+1+1 ranks").
  std::string describe() const;

 private:
  std::vector<std::vector<int>> hosts_;  // ranks of each host
  std::vector<int> host_index_;          // by rank
};

}  // namespace ringlet::collectives
