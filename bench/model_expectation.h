// ModelExpectation: what the model (model/) expects of a benchmark's row, for all_reduce_perf
// and its siblings' --model column: the algorithm that ran, simulated on the benchmark's ranks
// (one host) under a profile, as nccl-tests' bus bandwidth: for an all-reduce the mean of its
// simulated out-of-place and in-place runs, as the row's measured figure is the mean of those
// two columns. Over tcp or rdma between local ranks, the profile's inter-host link stands for
// the link within the host.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "model/predict.h"

namespace ringlet::bench {

class ModelExpectation {
 public:
  // `profile`: a file or "default"; `collective`: the benchmark's ("all_reduce", ...);
  // `transport`: its label ("shm", "tcp", ...).
  ModelExpectation(const std::string& profile, const std::string& collective, int ranks,
                   const std::string& transport);

  // The expected bus bandwidth in GB/s of `bytes` by `algorithm`; nullopt where the model has
  // no such collective or algorithm (a broadcast, the window all-reduce).
  std::optional<double> bus_GBps(const std::string& algorithm, std::size_t bytes);
  // Measured more than 30% away from expected.
  static bool off(double measured, double expected);
  // The lines above the table that say what the column is.
  std::string note() const;

 private:
  model::Profile profile_;
  std::optional<model::Collective> collective_;
  int ranks_;
  std::optional<model::Predictor> predictor_;
  std::optional<model::Predictor> out_of_place_;  // an all-reduce's
};

}  // namespace ringlet::bench
