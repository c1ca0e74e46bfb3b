// The median of a sample (the upper one of an even count; 0 for none): the fit's measurements
// keep the median of their runs.
#pragma once

#include <algorithm>
#include <vector>

namespace ringlet::model {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace ringlet::model
