// The --model column's simulations.
#include "bench/model_expectation.h"

#include <cmath>
#include <vector>

#include "core/error.h"

namespace ringlet::bench {

ModelExpectation::ModelExpectation(const std::string& profile, const std::string& collective,
                                   int ranks, const std::string& transport)
    : profile_(profile == "default" ? model::default_profile() : model::read_profile(profile)),
      ranks_(ranks) {
  if (transport != "shm" && transport != "auto") profile_.intra = profile_.inter;
  try {
    collective_ = model::parse_collective(collective);
  } catch (const core::ValueError&) {
    collective_ = std::nullopt;  // a collective the model does not simulate
  }
  if (!collective_) return;
  const model::NetworkShape shape{ranks_, 0};
  predictor_.emplace(*collective_, shape, profile_);
  if (*collective_ == model::Collective::all_reduce) {
    out_of_place_.emplace(*collective_, shape, profile_, std::vector<collectives::Algorithm>{},
                          /*in_place=*/false);
  }
}

std::optional<double> ModelExpectation::bus_GBps(const std::string& algorithm, std::size_t bytes) {
  if (!predictor_ || ranks_ < 2) return std::nullopt;
  for (const auto a : predictor_->algorithms()) {
    if (algorithm != collectives::algorithm_name(a)) continue;
    const double in_place = predictor_->at(a, bytes).bus_GBps;
    if (!out_of_place_) return in_place;
    return (in_place + out_of_place_->at(a, bytes).bus_GBps) / 2;
  }
  return std::nullopt;
}

bool ModelExpectation::off(double measured, double expected) {
  return expected > 0 && std::abs(measured / expected - 1) > 0.3;
}

std::string ModelExpectation::note() const {
  return core::str("# Model: expected busbw (GB/s) of the algorithm that ran, simulated under ",
                   profile_.name, " (", profile_.source, ")",
                   out_of_place_ ? ", the mean of its out-of-place and in-place runs" : "",
                   "; '*': the mean of the measured out-of-place and in-place busbw is more "
                   "than 30% off; '-': not simulated\n");
}

}  // namespace ringlet::bench
