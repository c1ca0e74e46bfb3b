// View ops: strides/offsets, storage sharing, errors, and finite-difference gradients
// (including non-contiguous inputs and zero-size dims).
#include <doctest/doctest.h>

#include "gradcheck.h"

using namespace ringlet;
using namespace ringlet::tensor;
using ringlet::testing::gradcheck;
using ringlet::testing::make_input;

TEST_CASE("view and reshape") {
  const Tensor a = arange(0.0, 12.0, 1.0);
  const Tensor v = a.view({3, -1});
  CHECK(v.shape() == Shape{3, 4});
  const Tensor t = v.transpose(0, 1);
  CHECK(t.shape() == Shape{4, 3});
  CHECK_FALSE(t.is_contiguous());
  CHECK_THROWS_WITH_AS(t.view({12}), doctest::Contains("use reshape()"), core::ShapeError);
  const Tensor r = t.reshape({12});
  CHECK(r.to_vector<float>() == std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  CHECK_THROWS_WITH_AS(a.view({5, -1}), doctest::Contains("shape [5, -1] is invalid"),
                       core::ShapeError);
  // a view that splits a dim of a non-contiguous tensor works without a copy
  const Tensor s = t.view({2, 2, 3});
  CHECK(s.storage() == a.storage());
  CHECK(flatten(zeros({2, 3, 4}), 1).shape() == Shape{2, 12});
}

TEST_CASE("slice, narrow, select, expand, squeeze, unsqueeze, cat") {
  const Tensor a = arange(0.0, 12.0, 1.0).view({3, 4});
  CHECK(slice(a, 1, 1, 4, 2).to_vector<float>() == std::vector<float>{1, 3, 5, 7, 9, 11});
  CHECK(narrow(a, 0, 1, 2).to_vector<float>() == std::vector<float>{4, 5, 6, 7, 8, 9, 10, 11});
  CHECK(select(a, 1, -1).to_vector<float>() == std::vector<float>{3, 7, 11});
  CHECK(slice(a, 0, 5, 10).shape() == Shape{0, 4});
  const Tensor e = expand(from_vector({1, 2}, {2, 1}), {2, 3});
  CHECK(e.strides() == Shape{1, 0});
  CHECK(e.to_vector<float>() == std::vector<float>{1, 1, 1, 2, 2, 2});
  CHECK(squeeze(zeros({1, 3, 1})).shape() == Shape{3});
  CHECK(squeeze(zeros({1, 3, 1}), 2).shape() == Shape{1, 3});
  CHECK(unsqueeze(zeros({3}), -1).shape() == Shape{3, 1});
  CHECK(cat({a, a}, 0).shape() == Shape{6, 4});
  CHECK(cat({a, narrow(a, 1, 0, 1)}, 1).shape() == Shape{3, 5});
  CHECK_THROWS_WITH_AS(narrow(a, 0, 2, 5), doctest::Contains("out of range"), core::ShapeError);
  CHECK_THROWS_WITH_AS(expand(zeros({2, 3}), {4, 3}),
                       doctest::Contains("cannot expand shape [2, 3] to [4, 3]"), core::ShapeError);
  CHECK_THROWS_WITH_AS(permute(zeros({2, 3}), {0, 0}), doctest::Contains("repeated"),
                       core::ValueError);
  CHECK_THROWS_WITH_AS(transpose(zeros({2, 3}), 0, 2), doctest::Contains("out of range"),
                       core::ValueError);
  CHECK_THROWS_WITH_AS(cat({zeros({2, 3}), zeros({2, 4})}, 0), doctest::Contains("differ outside"),
                       core::ShapeError);
}

TEST_CASE("gradients of movement ops (finite differences, f64)") {
  const Tensor x = make_input({2, 3, 4}, 1);
  gradcheck("reshape", [](auto& in) { return reshape(in[0], {4, 6}); }, {x});
  gradcheck("permute", [](auto& in) { return permute(in[0], {2, 0, 1}); }, {x});
  gradcheck("transpose", [](auto& in) { return transpose(in[0], 0, 2); }, {x});
  gradcheck("slice", [](auto& in) { return slice(in[0], 2, 1, 4, 2); }, {x});
  gradcheck("narrow", [](auto& in) { return narrow(in[0], 1, 1, 2); }, {x});
  gradcheck("select", [](auto& in) { return select(in[0], 0, 1); }, {x});
  gradcheck("expand", [](auto& in) { return expand(in[0], {5, 2, 3, 4}); }, {x});
  gradcheck("unsqueeze+squeeze",
            [](auto& in) { return squeeze(unsqueeze(in[0], 1), 1).contiguous(); }, {x});
  gradcheck("clone", [](auto& in) { return clone(in[0]); }, {x});
  const Tensor y = make_input({2, 2, 4}, 2);
  gradcheck("cat", [](auto& in) { return cat({in[0], in[1]}, 1); }, {x, y});
  const Tensor b = make_input({3, 1}, 3);
  gradcheck("expand size-1 dim", [](auto& in) { return expand(in[0], {3, 5}); }, {b});
  gradcheck("to(f32) and back",
            [](auto& in) { return in[0].to(core::DType::f32).to(core::DType::f64); },
            {make_input({3}, 9, 0.25, 0.5)}, {.eps = 1e-3, .atol = 1e-5, .rtol = 1e-4});
}

TEST_CASE("gradients through non-contiguous and zero-size inputs") {
  Tensor nc = make_input({4, 3}, 4).transpose(0, 1).detach();
  nc.requires_grad_();
  CHECK_FALSE(nc.is_contiguous());
  gradcheck("reshape of non-contiguous", [](auto& in) { return reshape(in[0], {12}); }, {nc});
  gradcheck("slice of non-contiguous", [](auto& in) { return slice(in[0], 1, 0, 4, 3); }, {nc});
  const Tensor empty_in = make_input({0, 3}, 5);
  Tensor out = permute(empty_in, {1, 0});
  out.backward(zeros({3, 0}, core::DType::f64));
  CHECK(empty_in.grad().shape() == Shape{0, 3});
}
