// PyTorch's scalar normal and bounded-integer transformations on top of mt19937.
#include "tensor/generator.h"

#include <bit>
#include <cmath>
#include <numbers>
#include <sstream>

#include "core/error.h"

namespace ringlet::tensor {

double Generator::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  // at::normal_distribution<double>: theta from the first draw, radius from the second.
  const double u1 = uniform();
  const double u2 = uniform();
  const double radius = std::sqrt(-2.0 * std::log1p(-u2));
  const double theta = 2.0 * std::numbers::pi * u1;
  spare_ = radius * std::sin(theta);
  has_spare_ = true;
  return radius * std::cos(theta);
}

std::int64_t Generator::integer(std::int64_t low, std::int64_t high) {
  RINGLET_CHECK(high > low, ValueError, "randint: empty range [", low, ", ", high, ")");
  // at::uniform_int_from_to_distribution: a plain modulo (its bias is range / 2^32 at most,
  // and keeping it is what makes the draws PyTorch's).
  const std::uint64_t range = static_cast<std::uint64_t>(high) - static_cast<std::uint64_t>(low);
  const std::uint64_t draw = range >= (std::uint64_t{1} << 32) ? random64() : random();
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(low) + draw % range);
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
