// Transforms work on contiguous [C, H, W] buffers directly: crop and flip move whole elements
// (memcpy by dtype size, so they serve u8 and f32 alike), to-float and normalize are one loop.
// Each draws a fixed number of values from the SampleRng whatever the outcome, so a pipeline
// consumes the same stream for every example.
#include "data/transforms.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"

namespace ringlet::data {
namespace {

using tensor::Tensor;

void check_chw(const Tensor& image, const char* op) {
  RINGLET_CHECK(image.dim() == 3, ShapeError, op, ": expected an image [C, H, W], got ",
                tensor::shape_str(image.shape()));
}

}  // namespace

std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

SampleRng::SampleRng(std::uint64_t seed, std::int64_t epoch, std::int64_t index)
    : state_(mix64(mix64(mix64(seed) ^ static_cast<std::uint64_t>(epoch)) ^
                   static_cast<std::uint64_t>(index))) {}

std::uint64_t SampleRng::next_u64() {
  state_ += 0x9e3779b97f4a7c15ull;
  return mix64(state_);
}

std::int64_t SampleRng::integer(std::int64_t low, std::int64_t high) {
  RINGLET_CHECK(low <= high, ValueError, "SampleRng::integer: empty range [", low, ", ", high, "]");
  const auto span = static_cast<std::uint64_t>(high - low) + 1;
  // Modulo bias is span / 2^64: negligible for the small ranges augmentation uses.
  return low + static_cast<std::int64_t>(next_u64() % span);
}

Tensor ToFloat::apply(const Tensor& image, SampleRng&) const {
  if (image.dtype() == core::DType::f32) return image;
  RINGLET_CHECK(image.dtype() == core::DType::u8, DTypeError,
                "ToFloat: expected a u8 or f32 image, got ", image.dtype());
  const Tensor src = image.contiguous();
  Tensor out = Tensor::empty(src.shape(), core::DType::f32);
  const auto* in = src.data<std::uint8_t>();
  auto* o = out.data<float>();
  for (std::int64_t i = 0, n = src.numel(); i < n; ++i) o[i] = static_cast<float>(in[i]) / 255.0f;
  return out;
}

Normalize::Normalize(std::vector<float> mean, std::vector<float> std)
    : mean_(std::move(mean)), std_(std::move(std)) {
  RINGLET_CHECK(!mean_.empty() && mean_.size() == std_.size(), ValueError,
                "Normalize: mean and std need the same, non-zero, number of values (got ",
                mean_.size(), " and ", std_.size(), ")");
  for (float s : std_) RINGLET_CHECK(s > 0.0f, ValueError, "Normalize: std must be > 0, got ", s);
}

Tensor Normalize::apply(const Tensor& image, SampleRng&) const {
  check_chw(image, "Normalize");
  RINGLET_CHECK(image.dtype() == core::DType::f32, DTypeError,
                "Normalize: expected an f32 image (add ToFloat first), got ", image.dtype());
  const std::int64_t channels = image.size(0);
  RINGLET_CHECK(mean_.size() == 1 || static_cast<std::int64_t>(mean_.size()) == channels,
                ShapeError, "Normalize: ", mean_.size(), " mean/std values for an image with ",
                channels, " channels");
  const Tensor src = image.contiguous();
  Tensor out = Tensor::empty(src.shape(), core::DType::f32);
  const std::int64_t plane = src.size(1) * src.size(2);
  const float* in = src.data<float>();
  float* o = out.data<float>();
  for (std::int64_t c = 0; c < channels; ++c) {
    const std::size_t k = mean_.size() == 1 ? 0 : static_cast<std::size_t>(c);
    const float m = mean_[k], inv = 1.0f / std_[k];
    for (std::int64_t i = c * plane; i < (c + 1) * plane; ++i) o[i] = (in[i] - m) * inv;
  }
  return out;
}

RandomCrop::RandomCrop(std::int64_t size, std::int64_t padding) : size_(size), padding_(padding) {
  RINGLET_CHECK(size > 0 && padding >= 0, ValueError,
                "RandomCrop: size must be > 0 and padding >= 0, got size ", size, ", padding ",
                padding);
}

Tensor RandomCrop::apply(const Tensor& image, SampleRng& rng) const {
  check_chw(image, "RandomCrop");
  const std::int64_t channels = image.size(0), h = image.size(1), w = image.size(2);
  const std::int64_t ph = h + 2 * padding_, pw = w + 2 * padding_;
  RINGLET_CHECK(size_ <= ph && size_ <= pw, ShapeError, "RandomCrop: crop ", size_,
                " larger than the padded image ", ph, "x", pw);
  // Window origin in padded coordinates; always two draws.
  const std::int64_t top = rng.integer(0, ph - size_);
  const std::int64_t left = rng.integer(0, pw - size_);
  const Tensor src = image.contiguous();
  Tensor out = Tensor::empty({channels, size_, size_}, image.dtype());
  const std::size_t es = core::dtype_size(image.dtype());
  const auto* in = static_cast<const std::uint8_t*>(src.raw_data());
  auto* o = static_cast<std::uint8_t*>(out.raw_data());
  std::memset(o, 0, out.nbytes());  // zero padding (0.0f is all-zero bits too)
  // Source columns [c0, c1) of the window that fall inside the original image.
  const std::int64_t c0 = std::max<std::int64_t>(left, padding_) - padding_;
  const std::int64_t c1 = std::min<std::int64_t>(left + size_, padding_ + w) - padding_;
  for (std::int64_t c = 0; c < channels; ++c) {
    for (std::int64_t y = 0; y < size_; ++y) {
      const std::int64_t sy = top + y - padding_;
      if (sy < 0 || sy >= h || c1 <= c0) continue;
      const std::int64_t dx = c0 + padding_ - left;  // destination column of c0
      std::memcpy(o + ((c * size_ + y) * size_ + dx) * es, in + ((c * h + sy) * w + c0) * es,
                  static_cast<std::size_t>(c1 - c0) * es);
    }
  }
  return out;
}

RandomHorizontalFlip::RandomHorizontalFlip(double p) : p_(p) {
  RINGLET_CHECK(p >= 0.0 && p <= 1.0, ValueError, "RandomHorizontalFlip: p must be in [0, 1], got ",
                p);
}

Tensor RandomHorizontalFlip::apply(const Tensor& image, SampleRng& rng) const {
  check_chw(image, "RandomHorizontalFlip");
  const bool flip = rng.uniform() < p_;  // always one draw
  if (!flip) return image;               // unchanged input is fine: nobody writes into it
  const std::int64_t rows = image.size(0) * image.size(1), w = image.size(2);
  const Tensor src = image.contiguous();
  Tensor out = Tensor::empty(src.shape(), image.dtype());
  const std::size_t es = core::dtype_size(image.dtype());
  const auto* in = static_cast<const std::uint8_t*>(src.raw_data());
  auto* o = static_cast<std::uint8_t*>(out.raw_data());
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t x = 0; x < w; ++x) {
      std::memcpy(o + (r * w + x) * es, in + (r * w + (w - 1 - x)) * es, es);
    }
  }
  return out;
}

RandomErasing::RandomErasing(RandomErasingOptions options) : o_(options) {
  RINGLET_CHECK(o_.p >= 0.0 && o_.p <= 1.0, ValueError, "RandomErasing: p must be in [0, 1], got ",
                o_.p);
  RINGLET_CHECK(0.0 < o_.min_area && o_.min_area <= o_.max_area && o_.max_area <= 1.0, ValueError,
                "RandomErasing: need 0 < min_area <= max_area <= 1, got [", o_.min_area, ", ",
                o_.max_area, "]");
  RINGLET_CHECK(0.0 < o_.min_ratio && o_.min_ratio <= o_.max_ratio, ValueError,
                "RandomErasing: need 0 < min_ratio <= max_ratio, got [", o_.min_ratio, ", ",
                o_.max_ratio, "]");
}

Tensor RandomErasing::apply(const Tensor& image, SampleRng& rng) const {
  check_chw(image, "RandomErasing");
  RINGLET_CHECK(image.dtype() == core::DType::f32, DTypeError,
                "RandomErasing: expected an f32 image (it runs after Normalize), got ",
                image.dtype());
  constexpr int kTries = 10;
  const std::int64_t channels = image.size(0), h = image.size(1), w = image.size(2);
  // Always 1 + 4 * kTries draws, whatever is erased, so the stream stays aligned.
  const bool erase = rng.uniform() < o_.p;
  std::int64_t top = 0, left = 0, eh = 0, ew = 0;
  for (int t = 0; t < kTries; ++t) {
    const double area =
        static_cast<double>(h * w) * (o_.min_area + (o_.max_area - o_.min_area) * rng.uniform());
    const double log_lo = std::log(o_.min_ratio), log_hi = std::log(o_.max_ratio);
    const double ratio = std::exp(log_lo + (log_hi - log_lo) * rng.uniform());
    const auto th = static_cast<std::int64_t>(std::lround(std::sqrt(area * ratio)));
    const auto tw = static_cast<std::int64_t>(std::lround(std::sqrt(area / ratio)));
    const double u_top = rng.uniform(), u_left = rng.uniform();
    if (eh > 0 || th < 1 || tw < 1 || th >= h || tw >= w) continue;  // keep the first fit
    eh = th;
    ew = tw;
    top = static_cast<std::int64_t>(u_top * static_cast<double>(h - th + 1));
    left = static_cast<std::int64_t>(u_left * static_cast<double>(w - tw + 1));
  }
  if (!erase || eh == 0) return image;
  Tensor out = image.contiguous().clone();
  float* o = out.data<float>();
  for (std::int64_t c = 0; c < channels; ++c)
    for (std::int64_t y = top; y < top + eh; ++y)
      std::fill_n(o + (c * h + y) * w + left, ew, o_.value);
  return out;
}

Compose::Compose(std::vector<std::shared_ptr<const Transform>> transforms)
    : transforms_(std::move(transforms)) {
  for (const auto& t : transforms_)
    RINGLET_CHECK(t != nullptr, ValueError, "Compose: null transform");
}

Tensor Compose::apply(const Tensor& image, SampleRng& rng) const {
  Tensor x = image;
  for (const auto& t : transforms_) x = t->apply(x, rng);
  return x;
}

}  // namespace ringlet::data
