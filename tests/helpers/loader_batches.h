// A data loader's batches in tests: one epoch's, and whether two runs gave the same batches
// bit for bit (numbers in order, indices, images and labels).
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "data/data_loader.h"

namespace ringlet::testing {

inline std::vector<data::Batch> run_epoch(data::DataLoader& loader, std::int64_t epoch) {
  std::vector<data::Batch> out;
  auto it = loader.begin_epoch(epoch);
  while (auto batch = it.next()) out.push_back(std::move(*batch));
  return out;
}

inline bool same_bytes(const tensor::Tensor& a, const tensor::Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

inline void check_same(const std::vector<data::Batch>& a, const std::vector<data::Batch>& b) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].number == static_cast<std::int64_t>(i));
    CHECK(a[i].indices == b[i].indices);
    CHECK(same_bytes(a[i].images, b[i].images));
    CHECK(same_bytes(a[i].labels, b[i].labels));
  }
}

}  // namespace ringlet::testing
