// Creating tensors: filled, ranges, from host data, and random from an explicit Generator.
#pragma once

#include <vector>

#include "tensor/generator.h"
#include "tensor/tensor.h"

namespace ringlet::tensor {

Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
Tensor ones(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
Tensor full(const Shape& shape, double value, DType dtype = DType::f32,
            Device device = Device::cpu());
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);
// 0-d tensor holding `value`.
Tensor scalar_tensor(double value, DType dtype = DType::f32);
// [start, end) by step, like torch.arange.
Tensor arange(double start, double end, double step = 1.0, DType dtype = DType::f32);
Tensor arange(std::int64_t end, DType dtype = DType::i64);
// Copies host values (converted to dtype) into a new CPU tensor; values.size() must equal
// the shape's element count.
Tensor from_vector(const std::vector<double>& values, const Shape& shape, DType dtype = DType::f32);
template <class T>
Tensor from_data(const T* data, const Shape& shape);  // T's own dtype, copied

// Random tensors: the values torch.rand / uniform_ / normal_ / randn / randint give after
// torch.manual_seed with the Generator's seed (see tensor/generator.h).
Tensor rand(const Shape& shape, Generator& gen, DType dtype = DType::f32);   // U[0, 1)
Tensor randn(const Shape& shape, Generator& gen, DType dtype = DType::f32);  // N(0, 1)
Tensor randint(std::int64_t low, std::int64_t high, const Shape& shape, Generator& gen,
               DType dtype = DType::i64);
// U[low, high), the building block of PyTorch's default initializers.
Tensor uniform(const Shape& shape, double low, double high, Generator& gen,
               DType dtype = DType::f32);
Tensor normal(const Shape& shape, double mean, double std, Generator& gen,
              DType dtype = DType::f32);

}  // namespace ringlet::tensor
