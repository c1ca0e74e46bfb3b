// Tensor creation. Random tensors draw from the caller's Generator in row-major order, so
// the same seed gives the same values on every machine.
#include "tensor/ops/creation.h"

#include <cmath>

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

Tensor rand(const Shape& shape, Generator& gen, DType dtype) {
  return generate(shape, dtype, [&] { return gen.uniform(); });
}

Tensor randn(const Shape& shape, Generator& gen, DType dtype) {
  return generate(shape, dtype, [&] { return gen.normal(); });
}

Tensor randint(std::int64_t low, std::int64_t high, const Shape& shape, Generator& gen,
               DType dtype) {
  RINGLET_CHECK(high > low, ValueError, "randint: empty range [", low, ", ", high, ")");
  return generate(shape, dtype, [&] { return static_cast<double>(gen.integer(low, high)); });
}

Tensor uniform(const Shape& shape, double low, double high, Generator& gen, DType dtype) {
  RINGLET_CHECK(high >= low, ValueError, "uniform: low ", low, " > high ", high);
  return generate(shape, dtype, [&] { return low + (high - low) * gen.uniform(); });
}

}  // namespace ringlet::tensor
