// Tensor creation. Random tensors draw from the caller's Generator in row-major order with
// PyTorch's CPU kernels' arithmetic, so the same seed gives torch.manual_seed's values (exactly
// for uniform, rand and randint; normal up to the last bits of log/sin/cos, which PyTorch takes
// from vectorized approximations on AVX2 machines). f16 and bf16 are drawn as f32 and rounded.
#include "tensor/ops/creation.h"

#include <cmath>
#include <numbers>
#include <type_traits>

#include "tensor/cpu/dispatch.h"
#include "tensor/ops/elementwise.h"

namespace ringlet::tensor {
namespace {

// Fills a new CPU tensor with next() converted to dtype.
template <class Next>
Tensor generate(const Shape& shape, DType dtype, Next&& next) {
  Tensor out = Tensor::empty(shape, dtype);
  cpu::dispatch_all(dtype, [&]<class T>() {
    T* data = static_cast<T*>(out.raw_data());
    const std::int64_t n = out.numel();
    for (std::int64_t i = 0; i < n; ++i) data[i] = cpu::convert<T>(next());
  });
  return out;
}

}  // namespace

Tensor empty(const Shape& shape, DType dtype, Device device) {
  return Tensor::empty(shape, dtype, device);
}

Tensor full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor out = Tensor::empty(shape, dtype, device);
  return fill_(out, value);
}

Tensor zeros(const Shape& shape, DType dtype, Device device) {
  return full(shape, 0.0, dtype, device);
}
Tensor ones(const Shape& shape, DType dtype, Device device) {
  return full(shape, 1.0, dtype, device);
}
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.dtype(), t.device()); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), t.dtype(), t.device()); }
Tensor full_like(const Tensor& t, double value) {
  return full(t.shape(), value, t.dtype(), t.device());
}
Tensor scalar_tensor(double value, DType dtype) { return full({}, value, dtype); }

Tensor arange(double start, double end, double step, DType dtype) {
  RINGLET_CHECK(step != 0.0, ValueError, "arange: step must be nonzero");
  RINGLET_CHECK((end - start) / step >= 0 || start == end, ValueError, "arange: [", start, ", ",
                end, ") cannot be reached with step ", step);
  const auto count = static_cast<std::int64_t>(std::ceil((end - start) / step));
  std::int64_t i = 0;
  return generate({std::max<std::int64_t>(count, 0)}, dtype,
                  [&] { return start + step * static_cast<double>(i++); });
}

Tensor arange(std::int64_t end, DType dtype) {
  return arange(0.0, static_cast<double>(end), 1.0, dtype);
}

Tensor from_vector(const std::vector<double>& values, const Shape& shape, DType dtype) {
  RINGLET_CHECK(static_cast<std::int64_t>(values.size()) == shape_numel(shape), ShapeError,
                "from_vector: ", values.size(), " values for shape ", shape_str(shape), " (",
                shape_numel(shape), " elements)");
  std::size_t i = 0;
  return generate(shape, dtype, [&] { return values[i++]; });
}

template <class T>
Tensor from_data(const T* data, const Shape& shape) {
  Tensor out = Tensor::empty(shape, core::dtype_of<T>());
  const std::int64_t n = out.numel();
  T* dst = out.data<T>();
  for (std::int64_t i = 0; i < n; ++i) dst[i] = data[i];
  return out;
}
template Tensor from_data<float>(const float*, const Shape&);
template Tensor from_data<double>(const double*, const Shape&);
template Tensor from_data<std::int64_t>(const std::int64_t*, const Shape&);
template Tensor from_data<std::int32_t>(const std::int32_t*, const Shape&);
template Tensor from_data<std::uint8_t>(const std::uint8_t*, const Shape&);

// torch's uniform_ kernel: u * (high - low) + low, computed in float with a 24-bit draw unless
// the tensor is f64 (53-bit draw, double arithmetic). The multiply-add is fused, as in the
// AVX2 build of the kernel that PyTorch runs on x86-64 machines.
Tensor uniform(const Shape& shape, double low, double high, Generator& gen, DType dtype) {
  RINGLET_CHECK(high >= low, ValueError, "uniform: low ", low, " > high ", high);
  if (dtype == DType::f64) {
    return generate(shape, dtype, [&] { return std::fma(gen.uniform(), high - low, low); });
  }
  const auto lo = static_cast<float>(low);
  const auto hi = static_cast<float>(high);
  return generate(shape, dtype, [&] { return std::fma(gen.uniform_f32(), hi - lo, lo); });
}

Tensor rand(const Shape& shape, Generator& gen, DType dtype) {
  return uniform(shape, 0.0, 1.0, gen, dtype);
}

namespace {

// torch's normal_fill_16: Box-Muller on pairs (j, j + 8) of 16 uniforms already in data.
template <class T>
void normal_fill_16(T* data, T mean, T std) {
  for (int j = 0; j < 8; ++j) {
    const T u1 = 1 - data[j];  // [0, 1) -> (0, 1] for the log
    const T u2 = data[j + 8];
    const T radius = std::sqrt(-2 * std::log(u1));
    const auto theta = static_cast<T>(2.0 * std::numbers::pi * u2);
    data[j] = radius * std::cos(theta) * std + mean;
    data[j + 8] = radius * std::sin(theta) * std + mean;
  }
}

// torch's normal_fill for 16 or more f32/f64 elements: uniforms for the whole tensor, Box-Muller
// sixteen at a time, and a tail redrawn as the last sixteen.
template <class T>
void normal_fill(T* data, std::int64_t n, T mean, T std, Generator& gen) {
  const auto draw = [&gen] {
    if constexpr (std::is_same_v<T, float>)
      return gen.uniform_f32();
    else
      return gen.uniform();
  };
  for (std::int64_t i = 0; i < n; ++i) data[i] = draw();
  for (std::int64_t i = 0; i + 16 <= n; i += 16) normal_fill_16(data + i, mean, std);
  if (n % 16 != 0) {
    T* tail = data + n - 16;
    for (int i = 0; i < 16; ++i) tail[i] = draw();
    normal_fill_16(tail, mean, std);
  }
}

}  // namespace

// torch's normal_ kernel: the 16-wide fill for f32/f64 tensors of 16 or more elements, the
// scalar Box-Muller (double arithmetic) otherwise.
Tensor normal(const Shape& shape, double mean, double std, Generator& gen, DType dtype) {
  RINGLET_CHECK(std >= 0.0, ValueError, "normal: std must be >= 0, got ", std);
  const std::int64_t n = shape_numel(shape);
  if (n >= 16 && (dtype == DType::f32 || dtype == DType::f64)) {
    Tensor out = Tensor::empty(shape, dtype);
    if (dtype == DType::f32) {
      normal_fill(out.data<float>(), n, static_cast<float>(mean), static_cast<float>(std), gen);
    } else {
      normal_fill(out.data<double>(), n, mean, std, gen);
    }
    return out;
  }
  return generate(shape, dtype, [&] { return gen.normal() * std + mean; });
}

Tensor randn(const Shape& shape, Generator& gen, DType dtype) {
  return normal(shape, 0.0, 1.0, gen, dtype);
}

Tensor randint(std::int64_t low, std::int64_t high, const Shape& shape, Generator& gen,
               DType dtype) {
  RINGLET_CHECK(high > low, ValueError, "randint: empty range [", low, ", ", high, ")");
  return generate(shape, dtype, [&] { return static_cast<double>(gen.integer(low, high)); });
}

}  // namespace ringlet::tensor
