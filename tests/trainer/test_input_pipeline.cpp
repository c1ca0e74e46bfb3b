// The loaders a config builds (trainer/input_pipeline.h) on generated CIFAR-10 files: `augment`
// gives every example the same pixels whatever the world size, new ones each epoch, black crop
// padding, and never touches the test split.
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <vector>

#include "cifar_files.h"
#include "loader_batches.h"
#include "temp_dir.h"
#include "trainer/input_pipeline.h"

using namespace ringlet;
using namespace ringlet::data;
using namespace ringlet::trainer;
using tensor::Tensor;
using testing::check_same;
using testing::run_epoch;

namespace {

// 50 training and 20 test images of CIFAR-10's format (3x32x32) in a temp dir, and a config
// that reads them with crop and flip on.
struct CifarConfig {
  testing::TempDir dir{"ringlet_augment"};
  TrainConfig config;
  CifarConfig() {
    testing::write_cifar_batches(dir.path, 10, 20);
    config.dataset = "cifar10";
    config.data_dir = dir.path.string();
    config.model = "resnet20";
    config.augment = "crop,flip,erase";
    config.seed = 5;
    config.batch_size = 8;
    config.workers = 0;
    config.limit_train = 47;  // not a multiple of 2 or 3: DistributedSampler pads the shards
    REQUIRE_NOTHROW(config.validate());
    config.fill_dataset_defaults();
  }
};

using Pixels = std::vector<float>;

// Each example's image in one epoch of `loader`, by dataset index (a padded shard repeats an
// index: its copies must agree).
std::map<std::int64_t, Pixels> images_by_index(DataLoader& loader, std::int64_t epoch) {
  std::map<std::int64_t, Pixels> out;
  for (const Batch& b : run_epoch(loader, epoch)) {
    const std::int64_t per = b.images.numel() / b.images.size(0);
    const float* p = b.images.data<float>();
    for (std::size_t j = 0; j < b.indices.size(); ++j) {
      Pixels image(p + static_cast<std::int64_t>(j) * per,
                   p + static_cast<std::int64_t>(j + 1) * per);
      const auto [it, fresh] = out.emplace(b.indices[j], image);
      if (!fresh) CHECK(it->second == image);
    }
  }
  return out;
}

std::map<std::int64_t, Pixels> train_images(const TrainConfig& c, std::int64_t epoch, int rank = 0,
                                            int world = 1) {
  return images_by_index(*make_train_loader(c, rank, world), epoch);
}

int count_different(const std::map<std::int64_t, Pixels>& a,
                    const std::map<std::int64_t, Pixels>& b) {
  int n = 0;
  for (const auto& [index, image] : a) n += b.at(index) != image ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("config augmentation: the same images per (seed, epoch, index) on 1, 2 or 3 ranks") {
  CifarConfig cifar;
  TrainConfig& c = cifar.config;
  const auto one_rank = train_images(c, 3);
  REQUIRE(one_rank.size() == 47);
  for (int world : {2, 3}) {
    CAPTURE(world);
    std::set<std::int64_t> seen;
    for (int rank = 0; rank < world; ++rank) {
      c.workers = rank;  // the worker count changes nothing either
      for (const auto& [index, image] : train_images(c, 3, rank, world)) {
        seen.insert(index);
        CHECK(image == one_rank.at(index));
      }
    }
    CHECK(seen.size() == 47);  // the shards cover every example
  }
  c.workers = 0;
  CHECK(train_images(c, 3) == one_rank);  // reproducible
  // Another epoch or seed draws new crops and flips for (nearly) every image; without
  // augmentation the images are the same in every epoch.
  CHECK(count_different(train_images(c, 4), one_rank) >= 40);
  c.seed = 6;
  CHECK(count_different(train_images(c, 3), one_rank) >= 40);
  c.augment = "";
  const auto plain = train_images(c, 3);
  CHECK(count_different(plain, one_rank) >= 40);
  CHECK(train_images(c, 4) == plain);
}

TEST_CASE("config augmentation: flip mirrors, crop pads with black, the test split is plain") {
  CifarConfig cifar;
  TrainConfig c = cifar.config;
  c.augment = "";
  const auto plain = train_images(c, 0);
  constexpr std::int64_t kSide = 32, kPlane = kSide * kSide;
  // Black, normalized: what a padded pixel of channel ch must hold.
  Tensor black = Tensor::empty({3, kSide, kSide}, core::DType::u8);
  std::memset(black.raw_data(), 0, black.nbytes());
  SampleRng unused(0, 0, 0);
  const auto black_normalized = input_transform(c, Split::test)->apply(black, unused);
  const float* fill = black_normalized.data<float>();

  c.augment = "flip";
  int flipped = 0;
  for (const auto& [index, image] : train_images(c, 0)) {
    const Pixels& p = plain.at(index);
    Pixels mirror(p.size());
    for (std::int64_t row = 0; row < 3 * kSide; ++row)
      for (std::int64_t x = 0; x < kSide; ++x)
        mirror[row * kSide + x] = p[row * kSide + kSide - 1 - x];
    CHECK((image == p || image == mirror));
    flipped += image == mirror ? 1 : 0;
  }
  CHECK(flipped > 5);
  CHECK(flipped < 42);

  c.augment = "crop";  // padding 4, CIFAR-10's default
  REQUIRE(c.crop_padding == 4);
  int shifted = 0;
  for (const auto& [index, image] : train_images(c, 0)) {
    const Pixels& p = plain.at(index);
    bool found = false;
    for (std::int64_t dy = -4; dy <= 4 && !found; ++dy)
      for (std::int64_t dx = -4; dx <= 4 && !found; ++dx) {
        bool same = true;
        for (std::int64_t k = 0; k < 3 * kPlane && same; ++k) {
          const std::int64_t ch = k / kPlane, y = k % kPlane / kSide + dy, x = k % kSide + dx;
          const bool inside = y >= 0 && y < kSide && x >= 0 && x < kSide;
          same = image[k] == (inside ? p[ch * kPlane + y * kSide + x] : fill[ch * kPlane]);
        }
        found = same;
        if (same && (dy != 0 || dx != 0)) ++shifted;
      }
    CHECK(found);
  }
  CHECK(shifted > 30);

  // The test split is never augmented: the same batches with and without `augment`.
  c.augment = "crop,flip";
  const auto test_augmented = run_epoch(*make_test_loader(c, 0, 1), 2);
  c.augment = "";
  check_same(test_augmented, run_epoch(*make_test_loader(c, 0, 1), 2));
  CHECK(test_augmented.front().images.shape() == tensor::Shape{20, 3, kSide, kSide});
}
