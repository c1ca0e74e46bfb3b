// The data loader, samplers and transforms: batches identical (bitwise) with 0, 1 and 4
// workers, drop_last, augmentation reproducible per (seed, epoch, index), prompt shutdown
// mid-epoch, worker exceptions and timeouts surfacing in next(); TensorDataset's rows of any
// shape and dtype. (The loaders a config builds: tests/trainer/test_input_pipeline.cpp.)
#include <doctest/doctest.h>

#include <chrono>
#include <cstring>
#include <set>
#include <stdexcept>
#include <thread>

#include "data/data_loader.h"
#include "data/distributed_sampler.h"
#include "data/tensor_dataset.h"
#include "loader_batches.h"

using namespace ringlet;
using namespace ringlet::data;
using tensor::Tensor;
using testing::check_same;
using testing::run_epoch;
using testing::same_bytes;
using Clock = std::chrono::steady_clock;

namespace {

// u8 images [C, H, W] whose pixels encode (index, position); optionally slow or failing.
class FakeDataset : public Dataset {
 public:
  FakeDataset(std::int64_t n, std::int64_t c = 3, std::int64_t h = 6, std::int64_t w = 5)
      : n_(n), c_(c), h_(h), w_(w) {}
  std::int64_t size() const override { return n_; }
  Example get(std::int64_t index) const override {
    if (index == fail_at) throw std::runtime_error("boom at " + std::to_string(index));
    if (delay.count() > 0) std::this_thread::sleep_for(delay);
    Tensor img = Tensor::empty({c_, h_, w_}, core::DType::u8);
    auto* p = img.data<std::uint8_t>();
    for (std::int64_t k = 0; k < img.numel(); ++k)
      p[k] = static_cast<std::uint8_t>((index * 31 + k) % 256);
    return {img, index % 10};
  }
  std::int64_t fail_at = -1;
  std::chrono::milliseconds delay{0};

 private:
  std::int64_t n_, c_, h_, w_;
};

std::shared_ptr<const Transform> augment() {
  return std::make_shared<Compose>(std::vector<std::shared_ptr<const Transform>>{
      std::make_shared<ToFloat>(), std::make_shared<RandomCrop>(6, 2),
      std::make_shared<RandomHorizontalFlip>(),
      std::make_shared<Normalize>(std::vector<float>{0.5f, 0.4f, 0.3f},
                                  std::vector<float>{0.2f, 0.25f, 0.3f})});
}

}  // namespace

TEST_CASE("batches are identical with 0, 1 and 4 workers") {
  auto data = std::make_shared<FakeDataset>(103);
  std::vector<std::vector<Batch>> runs;
  for (int workers : {0, 1, 4}) {
    DataLoaderOptions opt;
    opt.batch_size = 8;
    opt.num_workers = workers;
    opt.seed = 7;
    DataLoader loader(data, opt, augment(), std::make_shared<RandomSampler>(data->size(), 3));
    CHECK(loader.num_batches() == 13);
    runs.push_back(run_epoch(loader, 2));
  }
  check_same(runs[0], runs[1]);
  check_same(runs[0], runs[2]);
  const Batch& last = runs[0].back();
  CHECK(last.images.shape() == tensor::Shape{7, 3, 6, 6});
  CHECK(last.labels.shape() == tensor::Shape{7});
  // Every index exactly once, and labels match their index.
  std::set<std::int64_t> seen;
  for (const Batch& b : runs[0]) {
    const auto labels = b.labels.to_vector<std::int64_t>();
    for (std::size_t j = 0; j < b.indices.size(); ++j) {
      seen.insert(b.indices[j]);
      CHECK(labels[j] == b.indices[j] % 10);
    }
  }
  CHECK(seen.size() == 103);
}

TEST_CASE("drop_last and the sequential order") {
  auto data = std::make_shared<FakeDataset>(10);
  DataLoaderOptions opt;
  opt.batch_size = 4;
  DataLoader keep(data, opt, std::make_shared<ToFloat>());
  const auto all = run_epoch(keep, 0);
  REQUIRE(all.size() == 3);
  CHECK(all[2].indices == std::vector<std::int64_t>{8, 9});
  CHECK(all[1].indices == std::vector<std::int64_t>{4, 5, 6, 7});
  // Without augmentation the pixels are exactly the dataset's, divided by 255.
  CHECK(all[1].images.to_vector<float>()[0] == static_cast<float>((4 * 31) % 256) / 255.0f);
  opt.drop_last = true;
  opt.num_workers = 2;
  DataLoader drop(data, opt, std::make_shared<ToFloat>());
  CHECK(drop.num_batches() == 2);
  CHECK(run_epoch(drop, 0).size() == 2);
}

TEST_CASE("augmentation depends on (seed, epoch, index) only") {
  auto data = std::make_shared<FakeDataset>(32);
  DataLoaderOptions opt;
  opt.batch_size = 32;
  opt.seed = 11;
  DataLoader seq(data, opt, augment());
  DataLoader shuffled(data, opt, augment(), std::make_shared<RandomSampler>(32, 5));
  const Batch a = run_epoch(seq, 1)[0], b = run_epoch(shuffled, 1)[0];
  // The same index gets the same augmented image at a different position in the batch.
  const std::int64_t per = 3 * 6 * 6;
  for (std::size_t j = 0; j < 32; ++j) {
    const std::int64_t idx = b.indices[j];
    CHECK(std::memcmp(b.images.data<float>() + static_cast<std::int64_t>(j) * per,
                      a.images.data<float>() + idx * per, per * sizeof(float)) == 0);
  }
  CHECK(same_bytes(run_epoch(seq, 1)[0].images, a.images));        // same epoch: same
  CHECK_FALSE(same_bytes(run_epoch(seq, 2)[0].images, a.images));  // next epoch: new draws
  opt.seed = 12;
  DataLoader reseeded(data, opt, augment());
  CHECK_FALSE(same_bytes(run_epoch(reseeded, 1)[0].images, a.images));
}

TEST_CASE("samplers: sequential, and a seeded shuffle per epoch") {
  CHECK(SequentialSampler(4).indices() == std::vector<std::int64_t>{0, 1, 2, 3});
  CHECK(SequentialSampler(0).indices().empty());
  RandomSampler s(50, 9);
  const auto e0 = s.indices();
  CHECK(std::set<std::int64_t>(e0.begin(), e0.end()).size() == 50);
  CHECK(s.indices() == e0);
  s.set_epoch(1);
  const auto e1 = s.indices();
  CHECK(e1 != e0);
  s.set_epoch(0);
  CHECK(s.indices() == e0);
  CHECK(RandomSampler(50, 10).indices() != e0);
  CHECK(random_permutation(1, 3) == std::vector<std::int64_t>{0});
  // The loader sets the sampler's epoch.
  auto data = std::make_shared<FakeDataset>(50);
  DataLoaderOptions opt;
  opt.batch_size = 50;
  auto sampler = std::make_shared<RandomSampler>(50, 9);
  DataLoader loader(data, opt, std::make_shared<ToFloat>(), sampler);
  CHECK(run_epoch(loader, 1)[0].indices == e1);
  CHECK(sampler->epoch() == 1);
}

TEST_CASE("transforms: to-float, normalize, crop with padding, flip") {
  Tensor img = Tensor::empty({2, 3, 4}, core::DType::u8);
  for (std::int64_t k = 0; k < 24; ++k)
    img.data<std::uint8_t>()[k] = static_cast<std::uint8_t>(k * 10);
  SampleRng rng(1, 2, 3);
  const Tensor f = ToFloat().apply(img, rng);
  CHECK(f.to_vector<float>()[5] == 50.0f / 255.0f);
  const Tensor n = Normalize({0.1f, 0.2f}, {0.5f, 2.0f}).apply(f, rng);
  CHECK(n.to_vector<float>()[1] == doctest::Approx((10.0 / 255 - 0.1) / 0.5));
  CHECK(n.to_vector<float>()[13] == doctest::Approx((130.0 / 255 - 0.2) / 2.0));
  CHECK_THROWS_AS(Normalize({0.1f, 0.2f, 0.3f}, {1, 1, 1}).apply(f, rng), core::ShapeError);
  CHECK_THROWS_AS(Normalize({0.1f}, {1}).apply(img, rng), core::DTypeError);

  // p = 1 mirrors every row; p = 0 leaves the image as it is.
  const auto flipped = RandomHorizontalFlip(1.0).apply(img, rng).to_vector<std::uint8_t>();
  CHECK(flipped[0] == 30);
  CHECK(flipped[3] == 0);
  CHECK(same_bytes(RandomHorizontalFlip(0.0).apply(img, rng), img));

  // Crop against a reference: pad explicitly, then slice at the same (top, left).
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    SampleRng a(seed, 0, 0), b(seed, 0, 0);
    const Tensor crop = RandomCrop(3, 2).apply(img, a);
    const std::int64_t top = b.integer(0, 3 + 4 - 3), left = b.integer(0, 4 + 4 - 3);
    const auto got = crop.to_vector<std::uint8_t>();
    for (std::int64_t c = 0; c < 2; ++c)
      for (std::int64_t y = 0; y < 3; ++y)
        for (std::int64_t x = 0; x < 3; ++x) {
          const std::int64_t sy = top + y - 2, sx = left + x - 2;
          const int want =
              (sy < 0 || sy >= 3 || sx < 0 || sx >= 4) ? 0 : (c * 12 + sy * 4 + sx) * 10;
          CHECK(got[static_cast<std::size_t>((c * 3 + y) * 3 + x)] == want);
        }
  }
  CHECK_THROWS_AS(RandomCrop(9, 1).apply(img, rng), core::ShapeError);
}

TEST_CASE("random erasing: one rectangle of 2-33% of the image set to the value, per draw") {
  Tensor img = Tensor::empty({2, 10, 12}, core::DType::f32);
  for (std::int64_t k = 0; k < img.numel(); ++k) img.data<float>()[k] = 1.0f + k;
  int erased = 0;
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    SampleRng a(seed, 1, 2), b(seed, 1, 2);
    const Tensor out = RandomErasing().apply(img, a);
    CHECK(same_bytes(out, RandomErasing().apply(img, b)));  // the same for the same draw
    CHECK(a.next_u64() == b.next_u64());                    // and it consumed as many values
    const auto v = out.to_vector<float>();
    // Where the value (0) appears it forms one rectangle, the same in both channels.
    std::int64_t y0 = 10, y1 = -1, x0 = 12, x1 = -1, zeros = 0;
    for (std::int64_t y = 0; y < 10; ++y)
      for (std::int64_t x = 0; x < 12; ++x) {
        const bool z0 = v[static_cast<std::size_t>(y * 12 + x)] == 0.0f;
        const bool z1 = v[static_cast<std::size_t>(120 + y * 12 + x)] == 0.0f;
        CHECK(z0 == z1);
        if (!z0) {
          CHECK(v[static_cast<std::size_t>(y * 12 + x)] == 1.0f + y * 12 + x);  // untouched
          continue;
        }
        ++zeros;
        y0 = std::min(y0, y), y1 = std::max(y1, y), x0 = std::min(x0, x), x1 = std::max(x1, x);
      }
    if (zeros == 0) continue;
    ++erased;
    CHECK(zeros == (y1 - y0 + 1) * (x1 - x0 + 1));
    CHECK(zeros >= 1);
    CHECK(zeros <= 0.33 * 120 * 1.35);  // rounding of the sides allows a little more
  }
  CHECK(erased > 60);  // p = 0.5 (a draw that fits nothing in 10 tries erases nothing)
  CHECK(erased < 140);
  SampleRng rng(1, 2, 3);
  CHECK(same_bytes(RandomErasing({.p = 0.0}).apply(img, rng), img));
  CHECK_THROWS_AS(RandomErasing({.p = 1.5}), core::ValueError);
  CHECK_THROWS_AS(RandomErasing({.min_area = 0.5, .max_area = 0.2}), core::ValueError);
  CHECK_THROWS_AS(RandomErasing().apply(Tensor::empty({1, 4, 4}, core::DType::u8), rng),
                  core::DTypeError);
}

TEST_CASE("destroying an iterator mid-epoch stops its workers promptly") {
  auto data = std::make_shared<FakeDataset>(4000);
  data->delay = std::chrono::milliseconds(2);
  DataLoaderOptions opt;
  opt.batch_size = 8;
  opt.num_workers = 4;
  DataLoader loader(data, opt, std::make_shared<ToFloat>());
  const auto start = Clock::now();
  {
    auto it = loader.begin_epoch(0);
    REQUIRE(it.next().has_value());
    REQUIRE(it.next().has_value());
  }  // 498 batches left: the destructor must not build them
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  CHECK(seconds < 1.0);
  // A new epoch on the same loader works after an abandoned one.
  auto it = loader.begin_epoch(1);
  CHECK(it.next()->indices.front() == 0);
}

TEST_CASE("a worker's exception reaches next() in order, with its message") {
  for (int workers : {0, 4}) {
    auto data = std::make_shared<FakeDataset>(40);
    data->fail_at = 13;
    DataLoaderOptions opt;
    opt.batch_size = 4;
    opt.num_workers = workers;
    DataLoader loader(data, opt, std::make_shared<ToFloat>());
    auto it = loader.begin_epoch(0);
    for (int b = 0; b < 3; ++b) REQUIRE(it.next().has_value());  // indices 0..11 are fine
    CHECK_THROWS_WITH_AS(it.next(), "boom at 13", std::runtime_error);
    CHECK_THROWS_WITH_AS(it.next(), "boom at 13", std::runtime_error);  // and stays failed
  }
}

TEST_CASE("next() gives up after the timeout; bad options and inputs are errors") {
  auto data = std::make_shared<FakeDataset>(8);
  data->delay = std::chrono::milliseconds(150);
  DataLoaderOptions opt;
  opt.batch_size = 4;
  opt.num_workers = 1;
  opt.timeout = std::chrono::milliseconds(30);
  DataLoader slow(data, opt, std::make_shared<ToFloat>());
  {
    auto it = slow.begin_epoch(0);
    CHECK_THROWS_WITH_AS(it.next(), doctest::Contains("not ready after 30 ms"), core::TimeoutError);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let the detached worker finish

  auto fast = std::make_shared<FakeDataset>(8);
  opt.timeout = std::chrono::seconds(10);
  opt.batch_size = 0;
  CHECK_THROWS_AS(DataLoader(fast, opt), core::ValueError);
  opt.batch_size = 4;
  opt.num_workers = -1;
  CHECK_THROWS_AS(DataLoader(fast, opt), core::ValueError);
  opt.num_workers = 0;
  DataLoader raw(fast, opt);  // u8 images without ToFloat
  auto it = raw.begin_epoch(0);
  CHECK_THROWS_WITH_AS(it.next(), doctest::Contains("ToFloat"), core::DTypeError);
}

TEST_CASE("TensorDataset: inputs and targets of any shape and dtype, sampled and batched") {
  // x f32 [10, 3] (row i: 10i, 10i+1, 10i+2); y f64 [10, 2] (row i: -i, i/2) and i32 [10].
  Tensor x = Tensor::empty({10, 3}, core::DType::f32);
  Tensor y = Tensor::empty({10, 2}, core::DType::f64);
  Tensor k = Tensor::empty({10}, core::DType::i32);
  for (int i = 0; i < 10; ++i) {
    for (int j = 0; j < 3; ++j) x.data<float>()[i * 3 + j] = static_cast<float>(10 * i + j);
    y.data<double>()[i * 2] = -i;
    y.data<double>()[i * 2 + 1] = i / 2.0;
    k.data<std::int32_t>()[i] = 7 * i;
  }
  auto data = std::make_shared<TensorDataset>(x, y);
  REQUIRE(data->size() == 10);
  // Two ranks of a DistributedSampler: disjoint halves covering the rows; batches of 2 hold
  // each row's own input and target, in their own dtypes.
  std::set<std::int64_t> seen;
  for (int rank = 0; rank < 2; ++rank) {
    auto sampler = std::make_shared<DistributedSampler>(10, 2, rank);
    sampler->set_epoch(3);
    DataLoaderOptions opt;
    opt.batch_size = 2;
    DataLoader loader(data, opt, nullptr, sampler);
    for (const Batch& b : run_epoch(loader, 3)) {
      const auto rows = static_cast<std::int64_t>(b.indices.size());  // 2, 2, then 1
      REQUIRE(b.images.shape() == tensor::Shape{rows, 3});
      REQUIRE(b.labels.shape() == tensor::Shape{rows, 2});
      CHECK(b.images.dtype() == core::DType::f32);
      CHECK(b.labels.dtype() == core::DType::f64);
      for (std::size_t r = 0; r < b.indices.size(); ++r) {
        const std::int64_t i = b.indices[r];
        CHECK(seen.insert(i).second);
        CHECK(b.images.data<float>()[r * 3 + 2] == static_cast<float>(10 * i + 2));
        CHECK(b.labels.data<double>()[r * 2] == static_cast<double>(-i));
        CHECK(b.labels.data<double>()[r * 2 + 1] == static_cast<double>(i) / 2.0);
      }
    }
  }
  CHECK(seen.size() == 10);
  // Integer targets of shape [10] batch as [B].
  DataLoaderOptions opt;
  opt.batch_size = 4;
  DataLoader ints(std::make_shared<TensorDataset>(x, k), opt);
  const std::vector<Batch> batches = run_epoch(ints, 0);
  REQUIRE(batches.size() == 3);
  CHECK(batches[2].labels.shape() == tensor::Shape{2});
  CHECK(batches[2].labels.data<std::int32_t>()[1] == 63);
  // Bad input says what and where.
  CHECK_THROWS_WITH_AS(TensorDataset(x, Tensor::empty({9}, core::DType::i64)),
                       doctest::Contains("inputs [10, 3] and targets [9] differ"),
                       core::ValueError);
  CHECK_THROWS_AS(TensorDataset(x, Tensor()), core::ValueError);
  CHECK_THROWS_WITH_AS(data->get(10), doctest::Contains("index 10 out of range [0, 10)"),
                       core::ValueError);
  std::vector<Example> mixed{data->get(0), {Tensor::empty({3}, core::DType::f32), 1, {}}};
  CHECK_THROWS_WITH_AS(collate(mixed), doctest::Contains("example 1 has no target"),
                       core::ValueError);
  std::vector<Example> shapes{data->get(0), {Tensor::empty({4}, core::DType::f32), 0, y}};
  CHECK_THROWS_WITH_AS(collate(shapes), doctest::Contains("input 1 has shape [4], input 0 has [3]"),
                       core::ShapeError);
}
