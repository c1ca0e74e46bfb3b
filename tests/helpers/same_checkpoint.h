// Two checkpoints hold the same tensors, in the same order, bit for bit; each test compares
// the metadata it cares about itself.
#pragma once

#include <doctest/doctest.h>

#include <cstddef>

#include "checkpoint/safetensors.h"

namespace ringlet::testing {

inline void check_same_tensors(const checkpoint::safetensors::File& a,
                               const checkpoint::safetensors::File& b) {
  REQUIRE(a.tensors.size() == b.tensors.size());
  for (std::size_t i = 0; i < a.tensors.size(); ++i) {
    INFO(a.tensors[i].first);
    REQUIRE(a.tensors[i].first == b.tensors[i].first);
    CHECK(a.tensors[i].second.to_vector<double>() == b.tensors[i].second.to_vector<double>());
  }
}

}  // namespace ringlet::testing
