// The autograd engine: accumulation, shared subgraphs, hooks, callbacks at the end of a pass,
// no_grad, detach, retain_graph, freed-graph errors and a 10,000-op chain (no recursion).
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "gradcheck.h"

using namespace ringlet;
using namespace ringlet::tensor;
using core::DType;

TEST_CASE("gradients accumulate across backward calls and paths") {
  Tensor x = from_vector({1, 2, 3}, {3}, DType::f64);
  x.requires_grad_();
  Tensor y = sum(mul(x, x));  // dy/dx = 2x, x used twice in one node
  y.backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{2, 4, 6});
  sum(mul(x, 3.0)).backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{5, 7, 9});
  // a diamond: z = a + a where a = 2x
  x.set_grad(Tensor());
  Tensor a = mul(x, 2.0);
  sum(add(a, a)).backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{4, 4, 4});
}

TEST_CASE("a leaf's gradient never aliases another leaf's, the caller's or an upstream one") {
  Tensor a = from_vector({1, 2}, {2}, DType::f32);
  Tensor b = from_vector({3, 4}, {2}, DType::f32);
  a.requires_grad_();
  b.requires_grad_();
  Tensor seed = from_vector({1, 1}, {2}, DType::f32);
  add(a, b).backward(seed);  // add hands the same incoming gradient to both inputs
  CHECK(a.grad().storage() != b.grad().storage());
  CHECK(a.grad().storage() != seed.storage());
  fill_(seed, 7.0);
  Tensor a_grad = a.grad();
  fill_(a_grad, 5.0);
  CHECK(b.grad().to_vector<float>() == std::vector<float>{1, 1});
  // A leaf that is the root keeps a copy of the caller's gradient.
  Tensor c = from_vector({1, 2}, {2}, DType::f32);
  c.requires_grad_();
  c.backward(seed);
  fill_(seed, 0.0);
  CHECK(c.grad().to_vector<float>() == std::vector<float>{7, 7});
  // A reshape's gradient is a view of the upstream one; the leaf gets memory of its own.
  Tensor d = from_vector({1, 2, 3, 4}, {2, 2}, DType::f32);
  d.requires_grad_();
  Tensor r = reshape(d, {4});
  Tensor up = from_vector({1, 2, 3, 4}, {4}, DType::f32);
  r.backward(up);
  CHECK(d.grad().storage() != up.storage());
}

TEST_CASE("a backward observer sees every node of its thread's backward, then is put back") {
  std::vector<std::string> seen;
  const BackwardObserver previous =
      set_backward_observer([&](const Node& node, std::chrono::steady_clock::time_point start,
                                std::chrono::steady_clock::time_point end) {
        CHECK(end >= start);
        seen.push_back(node.name());
      });
  CHECK_FALSE(previous);  // none was set
  Tensor w = ones({3, 2}, DType::f32).requires_grad_(true);
  sum(matmul(ones({4, 3}, DType::f32), w)).backward();
  CHECK(seen == std::vector<std::string>{"SumBackward", "MatmulBackward"});
  // Another thread's backward is not this thread's observer's business.
  std::thread([&] { sum(matmul(ones({4, 3}, DType::f32), w)).backward(); }).join();
  CHECK(seen.size() == 2);
  const BackwardObserver mine = set_backward_observer(previous);
  CHECK(static_cast<bool>(mine));
  sum(w).backward();
  CHECK(seen.size() == 2);
}

TEST_CASE("a 10,000-op chain does not recurse") {
  Tensor x = from_vector({1.0}, {1}, DType::f64);
  x.requires_grad_();
  Tensor y = x;
  for (int i = 0; i < 10000; ++i) y = add(y, 1e-4);
  y = mul(y, 2.0);
  sum(y).backward();
  CHECK(x.grad().item() == 2.0);
  CHECK(y.item() == doctest::Approx(4.0));
}

TEST_CASE("hooks fire once per backward, after the leaf's gradient is final") {
  Tensor w = from_vector({1, 1}, {2}, DType::f64);
  w.requires_grad_();
  std::vector<std::vector<double>> seen;
  w.register_hook([&](const Tensor& g) { seen.push_back(g.to_vector<double>()); });
  // w reaches the loss through two paths; the hook must see the sum of both.
  Tensor loss = sum(add(mul(w, 3.0), mul(w, 4.0)));
  loss.backward();
  REQUIRE(seen.size() == 1);
  CHECK(seen[0] == std::vector<double>{7, 7});
  CHECK_THROWS_AS(mul(w, 2.0).register_hook([](const Tensor&) {}), core::AutogradError);
}

TEST_CASE("hooks fire in reverse order of use, as DDP bucketing expects") {
  Tensor w1 = ones({2}, DType::f64), w2 = ones({2}, DType::f64);
  w1.requires_grad_();
  w2.requires_grad_();
  std::vector<int> order;
  w1.register_hook([&](const Tensor&) { order.push_back(1); });
  w2.register_hook([&](const Tensor&) { order.push_back(2); });
  Tensor h = tanh(mul(ones({2}, DType::f64), w1));  // layer 1
  Tensor out = sum(mul(h, w2));                     // layer 2
  out.backward();
  CHECK(order == std::vector<int>{2, 1});
}

TEST_CASE("callbacks queued by hooks run once the pass has run every hook, in order") {
  Tensor w1 = ones({2}, DType::f64), w2 = ones({2}, DType::f64);
  w1.requires_grad_();
  w2.requires_grad_();
  std::vector<std::string> events;
  w1.register_hook([&](const Tensor&) {
    events.push_back("hook 1");
    queue_backward_callback([&] {
      events.push_back("callback 1");
      queue_backward_callback([&] { events.push_back("callback 3, queued by callback 1"); });
    });
  });
  w2.register_hook([&](const Tensor&) {
    events.push_back("hook 2");
    queue_backward_callback([&] { events.push_back("callback 2"); });
  });
  sum(mul(tanh(mul(ones({2}, DType::f64), w1)), w2)).backward();
  CHECK(events == std::vector<std::string>{"hook 2", "hook 1", "callback 2", "callback 1",
                                           "callback 3, queued by callback 1"});
  // Each pass has its own queue: nothing runs twice.
  events.clear();
  sum(w2).backward();
  CHECK(events == std::vector<std::string>{"hook 2", "callback 2"});
  CHECK_THROWS_WITH_AS(queue_backward_callback([] {}), doctest::Contains("outside a backward pass"),
                       core::AutogradError);
  // A callback's exception ends the backward with it.
  Tensor w3 = ones({1}, DType::f64);
  w3.requires_grad_();
  w3.register_hook([](const Tensor&) {
    queue_backward_callback([] { throw core::ValueError("from the callback"); });
  });
  CHECK_THROWS_WITH_AS(sum(w3).backward(), "from the callback", core::ValueError);
  CHECK_THROWS_AS(queue_backward_callback([] {}), core::AutogradError);  // the queue is gone
}

TEST_CASE("no_grad, detach and requires_grad") {
  Tensor x = ones({2}, DType::f64);
  x.requires_grad_();
  {
    NoGradGuard guard;
    CHECK_FALSE(grad_enabled());
    CHECK_FALSE(mul(x, 2.0).requires_grad());
  }
  CHECK(grad_enabled());
  CHECK(mul(x, 2.0).requires_grad());
  CHECK(mul(x, 2.0).grad_fn()->name() == "mul");
  const Tensor d = mul(x, 2.0).detach();
  CHECK_FALSE(d.requires_grad());
  CHECK(d.is_leaf());
  CHECK_THROWS_WITH_AS(sum(d).backward(), doctest::Contains("does not require grad"),
                       core::AutogradError);
  CHECK_THROWS_WITH_AS(ones({2}, DType::i64).requires_grad_(),
                       doctest::Contains("only floating-point"), core::DTypeError);
  CHECK_THROWS_WITH_AS(mul(x, 2.0).backward(), doctest::Contains("one-element output"),
                       core::AutogradError);
  CHECK_THROWS_WITH_AS(mul(x, 2.0).backward(ones({3}, DType::f64)),
                       doctest::Contains("gradient of shape [3] for an input of shape [2]"),
                       core::AutogradError);
}

TEST_CASE("retain_graph and backward through a freed graph") {
  Tensor x = from_vector({2}, {1}, DType::f64);
  x.requires_grad_();
  Tensor y = sum(exp(x));
  y.backward({}, /*retain_graph=*/true);
  y.backward();
  CHECK(x.grad().item() == doctest::Approx(2 * std::exp(2.0)));
  CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("a second time"), core::AutogradError);
}

TEST_CASE("branches that receive no gradient still finish shared leaves") {
  Tensor x = from_vector({1, 2}, {2}, DType::f64);
  x.requires_grad_();
  auto [values, indices] = max(mul(x, 1.0), 0);  // indices carry no gradient
  Tensor loss = add(sum(mul(x, 2.0)), values);
  int fired = 0;
  x.register_hook([&](const Tensor&) { ++fired; });
  loss.backward();
  CHECK(fired == 1);
  CHECK(x.grad().to_vector<double>() == std::vector<double>{2, 3});
}
