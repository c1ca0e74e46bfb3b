// The predictor's shortcuts against plain simulation: the ring's chain bound is never above the
// ring's simulated time (and equals it where the chain is all there is), and the fastest
// algorithm found with the bound is the one found by simulating every algorithm.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>

#include "collectives/algorithm_choice.h"
#include "collectives/fingerprint.h"
#include "model/predict.h"
#include "model/simulate.h"

using namespace ringlet;
using collectives::Algorithm;

namespace {

double simulated_ring(model::Collective collective, model::NetworkShape shape, std::size_t bytes,
                      const model::Profile& profile) {
  return model::simulate({collective, Algorithm::ring, shape, bytes}, profile).seconds;
}

// Links alone: no cores to wait for, no copies, no reduction or copy to spend time on.
model::Profile wires_only() {
  model::Profile p;
  p.name = "wires only";
  p.intra = {2.0, 4.0};
  p.inter = {7.0, 1.0};
  p.nic_GBps = 100.0;
  p.nics_per_host = 64;
  p.reduce_GBps = 1e9;
  p.copy_GBps = 1e9;
  p.slice_bytes = std::size_t{1} << 30;
  return p;
}

// Links that are faster by size than by their rates, within a small cache.
model::Profile by_size() {
  model::Profile p = model::default_profile();
  p.name = "by size";
  p.intra.by_size = {{8, 0.2, 0.3}, {65536, 2.0, 2.5}, {1 << 20, 30, 40}};
  p.inter.by_size = {{8, 5.0, 7.0}, {65536, 12.0, 16.0}, {1 << 20, 150, 200}};
  p.cache_bytes = 8 << 20;
  return p;
}

}  // namespace

TEST_CASE("the ring's chain bound is at most its simulated time, on every shape and collective") {
  const model::Collective collectives[] = {model::Collective::all_reduce,
                                           model::Collective::all_gather,
                                           model::Collective::reduce_scatter};
  const model::NetworkShape shapes[] = {{2, 0}, {3, 0}, {5, 0}, {8, 0}, {8, 2}, {9, 3}, {12, 4}};
  for (const model::Collective c : collectives) {
    for (const model::NetworkShape shape : shapes) {
      for (const std::size_t bytes : {std::size_t{8}, std::size_t{4096}, std::size_t{1} << 20}) {
        for (const model::Profile& profile : {model::default_profile(), by_size()}) {
          const double bound = model::ring_chain_seconds(c, shape, profile, bytes);
          const double time = simulated_ring(c, shape, bytes, profile);
          CAPTURE(profile.name);
          CAPTURE(model::collective_name(c));
          CAPTURE(shape.ranks);
          CAPTURE(shape.per_host);
          CAPTURE(bytes);
          CHECK(bound > 0);
          CHECK(bound <= time * (1 + 1e-12));
        }
      }
    }
  }
}

TEST_CASE("with nothing but links, the all-gather ring takes exactly its longest chain") {
  // Flat, every link alike: the chain round the ring, behind the fingerprint's message,
  // (n - 1) x (latency + wire).
  for (const int n : {2, 6}) {
    const std::size_t bytes = (std::size_t{1} << 16) * static_cast<std::size_t>(n);  // 64 KiB
    CAPTURE(n);
    CHECK(
        model::ring_chain_seconds(model::Collective::all_gather, {n, 0}, wires_only(), bytes) ==
        doctest::Approx(simulated_ring(model::Collective::all_gather, {n, 0}, bytes, wires_only()))
            .epsilon(1e-9));
  }
  // 12 ranks on 3 hosts: the slowest link, one host's way out, sends the fingerprint and its 11
  // blocks one after another, and the last arrives its latency later.
  const double across = 7e-6, wire_across = 65536 / 1e9;
  const double fingerprint = sizeof(collectives::Fingerprint) / 1e9;
  const double bound =
      model::ring_chain_seconds(model::Collective::all_gather, {12, 4}, wires_only(), 12 << 16);
  CHECK(bound == doctest::Approx(fingerprint + 11 * wire_across + across).epsilon(1e-12));
  CHECK(bound == doctest::Approx(
                     simulated_ring(model::Collective::all_gather, {12, 4}, 12 << 16, wires_only()))
                     .epsilon(1e-9));
}

TEST_CASE("the fastest algorithm with the ring's bound is the fastest of all simulated") {
  const model::NetworkShape shape{64, 8};
  model::Predictor pruned(model::Collective::all_reduce, shape, model::default_profile());
  model::Predictor every(model::Collective::all_reduce, shape, model::default_profile());
  for (int e = 3; e <= 26; e += 3) {
    const std::size_t bytes = std::size_t{1} << e;
    const std::vector<model::Prediction> all = every.all(bytes);
    const auto best = std::min_element(all.begin(), all.end(), [](const auto& a, const auto& b) {
      return a.result.seconds < b.result.seconds;
    });
    CAPTURE(bytes);
    CHECK(pruned.fastest(bytes) == best->algorithm);
  }
}

TEST_CASE("at 1,024 ranks, 8 per host, the bound alone rules the ring out at small sizes") {
  const model::NetworkShape shape{1024, 8};
  for (const std::size_t bytes : {std::size_t{8}, std::size_t{16} << 10}) {
    const double tree =
        model::simulate({model::Collective::all_reduce, Algorithm::tree, shape, bytes},
                        model::default_profile())
            .seconds;
    CAPTURE(bytes);
    CHECK(model::ring_chain_seconds(model::Collective::all_reduce, shape, model::default_profile(),
                                    bytes) > tree);
  }
}
