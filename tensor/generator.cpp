// Box-Muller normals and unbiased bounded integers on top of mt19937_64.
#include "tensor/generator.h"

#include <bit>
#include <cmath>
#include <limits>
#include <numbers>
#include <sstream>

#include "core/error.h"

namespace ringlet::tensor {

double Generator::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  double u1 = uniform();
  while (u1 <= 0.0) u1 = uniform();
  const double u2 = uniform();
  const double radius = std::sqrt(-2.0 * std::log(u1));
  spare_ = radius * std::sin(2.0 * std::numbers::pi * u2);
  has_spare_ = true;
  return radius * std::cos(2.0 * std::numbers::pi * u2);
}

std::int64_t Generator::integer(std::int64_t low, std::int64_t high) {
  RINGLET_CHECK(high > low, ValueError, "randint: empty range [", low, ", ", high, ")");
  const std::uint64_t range = static_cast<std::uint64_t>(high - low);
  const std::uint64_t limit =
      std::numeric_limits<std::uint64_t>::max() - std::numeric_limits<std::uint64_t>::max() % range;
  std::uint64_t draw = engine_();
  while (draw >= limit) draw = engine_();  // rejection keeps it unbiased
  return low + static_cast<std::int64_t>(draw % range);
}

std::string Generator::state() const {
  std::ostringstream out;
  // The spare normal as raw bits: exact, and libstdc++ cannot read hexfloat back.
  out << engine_ << ' ' << has_spare_ << ' ' << std::bit_cast<std::uint64_t>(spare_);
  return out.str();
}

void Generator::set_state(const std::string& state) {
  std::istringstream in(state);
  std::uint64_t spare_bits = 0;
  in >> engine_ >> has_spare_ >> spare_bits;
  RINGLET_CHECK(!in.fail(), ValueError, "Generator::set_state: malformed state string");
  spare_ = std::bit_cast<double>(spare_bits);
}

}  // namespace ringlet::tensor
