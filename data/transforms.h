// Per-example transforms: to-float (/255), normalize (per-channel mean/std), random crop with
// zero padding, random horizontal flip, random erasing, and Compose. Randomness comes from a
// SampleRng seeded by hashing (seed, epoch, dataset index), so an example's augmentation depends
// only on those three numbers: the same on any worker thread, with any number of workers, on any
// rank. Transforms never write into their input (it may view the dataset's memory): they return a
// new tensor, or the input itself when nothing changes. They are const and thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tensor/tensor.h"

namespace ringlet::data {

// splitmix64 finalizer: a bijective 64-bit mix with good avalanche.
std::uint64_t mix64(std::uint64_t x);

// A tiny deterministic generator (splitmix64 stream) for one example's augmentation.
class SampleRng {
 public:
  SampleRng(std::uint64_t seed, std::int64_t epoch, std::int64_t index);
  std::uint64_t next_u64();
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }  // [0, 1)
  std::int64_t integer(std::int64_t low, std::int64_t high);  // [low, high], inclusive

 private:
  std::uint64_t state_;
};

class Transform {
 public:
  virtual ~Transform() = default;
  virtual tensor::Tensor apply(const tensor::Tensor& image, SampleRng& rng) const = 0;
};

// u8 -> f32 divided by 255; f32 passes through unchanged; other dtypes are a DTypeError.
class ToFloat : public Transform {
 public:
  tensor::Tensor apply(const tensor::Tensor& image, SampleRng& rng) const override;
};

// (x - mean[c]) / std[c] on f32 images; one value of each applies to every channel.
class Normalize : public Transform {
 public:
  Normalize(std::vector<float> mean, std::vector<float> std);
  tensor::Tensor apply(const tensor::Tensor& image, SampleRng& rng) const override;

 private:
  std::vector<float> mean_, std_;
};

// Pads each side by `padding` zeros, then takes a random size x size window (torchvision's
// RandomCrop(size, padding)). Any dtype.
class RandomCrop : public Transform {
 public:
  RandomCrop(std::int64_t size, std::int64_t padding);
  tensor::Tensor apply(const tensor::Tensor& image, SampleRng& rng) const override;

 private:
  std::int64_t size_, padding_;
};

// Mirrors the width axis with probability p. Any dtype.
class RandomHorizontalFlip : public Transform {
 public:
  explicit RandomHorizontalFlip(double p = 0.5);
  tensor::Tensor apply(const tensor::Tensor& image, SampleRng& rng) const override;

 private:
  double p_;
};

// With probability p, sets a random rectangle of every channel to `value` (torchvision's
// RandomErasing, Zhong et al. 2017): its area a uniform fraction in [min_area, max_area] of the
// image, its aspect ratio log-uniform in [min_ratio, max_ratio]; up to 10 tries for a rectangle
// that fits, else the image is left as it is. Runs after Normalize, so the default value 0 is
// the dataset's mean. f32 images.
struct RandomErasingOptions {
  double p = 0.5;
  double min_area = 0.02, max_area = 0.33;
  double min_ratio = 0.3, max_ratio = 3.3;
  float value = 0.0f;
};

class RandomErasing : public Transform {
 public:
  explicit RandomErasing(RandomErasingOptions options = {});
  tensor::Tensor apply(const tensor::Tensor& image, SampleRng& rng) const override;

 private:
  RandomErasingOptions o_;
};

// Applies transforms in order, all drawing from the same SampleRng.
class Compose : public Transform {
 public:
  explicit Compose(std::vector<std::shared_ptr<const Transform>> transforms);
  tensor::Tensor apply(const tensor::Tensor& image, SampleRng& rng) const override;

 private:
  std::vector<std::shared_ptr<const Transform>> transforms_;
};

}  // namespace ringlet::data
