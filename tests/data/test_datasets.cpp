// The datasets: IDX (raw and gzip) and CIFAR-10 files generated here, every kind of
// corruption (each a DataError naming the file and what was expected), and the real
// Fashion-MNIST from /usr/share/datasets/fashion-mnist when it is installed.
#include <doctest/doctest.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "cifar_files.h"
#include "data/cifar_dataset.h"
#include "data/idx_dataset.h"
#include "temp_dir.h"

using namespace ringlet;
using namespace ringlet::data;
namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

namespace {

using ringlet::testing::cifar_records;
using ringlet::testing::TempDir;
using ringlet::testing::write_cifar_batches;

void put_be32(Bytes& out, std::uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<std::uint8_t>(v >> s));
}

std::uint8_t pixel(std::int64_t i, std::int64_t r, std::int64_t c) {
  return static_cast<std::uint8_t>((i * 7 + r * 3 + c) % 256);
}

Bytes idx_images(std::uint32_t count, std::uint32_t rows, std::uint32_t cols) {
  Bytes b;
  put_be32(b, 0x00000803);
  put_be32(b, count);
  put_be32(b, rows);
  put_be32(b, cols);
  for (std::uint32_t i = 0; i < count; ++i)
    for (std::uint32_t r = 0; r < rows; ++r)
      for (std::uint32_t c = 0; c < cols; ++c) b.push_back(pixel(i, r, c));
  return b;
}

Bytes idx_labels(std::uint32_t count) {
  Bytes b;
  put_be32(b, 0x00000801);
  put_be32(b, count);
  for (std::uint32_t i = 0; i < count; ++i) b.push_back(static_cast<std::uint8_t>(i % 10));
  return b;
}

Bytes gzip(const Bytes& in) {
  z_stream zs{};
  REQUIRE(deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  Bytes out(deflateBound(&zs, in.size()) + 32);
  zs.next_in = const_cast<Bytef*>(in.data());
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = out.data();
  zs.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&zs, Z_FINISH) == Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

void write_file(const fs::path& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

// Runs fn, which must throw E whose message contains every one of `parts`.
template <class E = DataError>
void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    FAIL("expected an exception mentioning ", parts.front());
  } catch (const E& e) {
    const std::string what = e.what();
    for (const auto& p : parts)
      CHECK_MESSAGE(what.find(p) != std::string::npos, what, " lacks ", p);
  }
}

}  // namespace

TEST_CASE("IDX raw and gzip files parse to the same examples") {
  TempDir dir;
  const fs::path raw_img = dir.path / "a-images", raw_lbl = dir.path / "a-labels";
  const fs::path gz_img = dir.path / "b-images.gz", gz_lbl = dir.path / "b-labels.gz";
  write_file(raw_img, idx_images(5, 4, 3));
  write_file(raw_lbl, idx_labels(5));
  write_file(gz_img, gzip(idx_images(5, 4, 3)));
  write_file(gz_lbl, gzip(idx_labels(5)));
  for (const auto& ds : {IdxDataset(raw_img, raw_lbl), IdxDataset(gz_img, gz_lbl)}) {
    REQUIRE(ds.size() == 5);
    CHECK(ds.rows() == 4);
    CHECK(ds.cols() == 3);
    for (std::int64_t i = 0; i < 5; ++i) {
      const Example ex = ds.get(i);
      CHECK(ex.label == i % 10);
      CHECK(ex.image.dtype() == core::DType::u8);
      CHECK(ex.image.shape() == tensor::Shape{1, 4, 3});
      const auto px = ex.image.to_vector<std::uint8_t>();
      for (std::int64_t r = 0; r < 4; ++r)
        for (std::int64_t c = 0; c < 3; ++c)
          CHECK(px[static_cast<std::size_t>(r * 3 + c)] == pixel(i, r, c));
    }
    CHECK_THROWS_AS(ds.get(5), core::ValueError);
    CHECK_THROWS_AS(ds.get(-1), core::ValueError);
  }
}

TEST_CASE("IDX splits by file prefix, .gz preferred; a split of zero examples is refused") {
  TempDir dir;
  write_file(dir.path / "train-images-idx3-ubyte.gz", gzip(idx_images(6, 2, 2)));
  write_file(dir.path / "train-labels-idx1-ubyte.gz", gzip(idx_labels(6)));
  write_file(dir.path / "train-images-idx3-ubyte", idx_images(1, 2, 2));  // shadowed by .gz
  write_file(dir.path / "train-labels-idx1-ubyte", idx_labels(1));
  write_file(dir.path / "t10k-images-idx3-ubyte", idx_images(0, 2, 2));
  write_file(dir.path / "t10k-labels-idx1-ubyte", idx_labels(0));
  CHECK(IdxDataset::open(dir.path, Split::train).size() == 6);
  expect_error([&] { IdxDataset::open(dir.path, Split::test); },
               {(dir.path / "t10k-images-idx3-ubyte").string(),
                "dimension 0 is 0, expected > 0 (the file holds no examples)"});
}

TEST_CASE("IDX corruptions are DataErrors naming the file and what was expected") {
  TempDir dir;
  const fs::path img = dir.path / "img", lbl = dir.path / "lbl";
  const fs::path good_img = dir.path / "good-img", good_lbl = dir.path / "good-lbl";
  write_file(good_img, idx_images(4, 3, 3));
  write_file(good_lbl, idx_labels(4));
  const auto load = [&](const fs::path& i, const fs::path& l) {
    return [=] { IdxDataset ds(i, l); };
  };

  Bytes b = idx_images(4, 3, 3);
  b[3] = 0x01;  // a label magic in an image file
  write_file(img, b);
  expect_error(load(img, good_lbl), {img.string(), "bad magic 0x00000801", "expected 0x00000803"});
  b = idx_labels(4);
  b[2] = 0x09;
  write_file(lbl, b);
  expect_error(load(good_img, lbl), {lbl.string(), "bad magic 0x00000901", "expected 0x00000801"});

  b = idx_images(4, 3, 3);  // wrong number of dims: a 2-dim magic
  b[3] = 0x02;
  write_file(img, b);
  expect_error(load(img, good_lbl), {img.string(), "expected 0x00000803"});
  b = idx_images(4, 3, 3);  // a zero dimension
  b[11] = 0;
  write_file(img, b);
  expect_error(load(img, good_lbl), {img.string(), "dimension 1 is 0"});

  write_file(lbl, idx_labels(5));
  expect_error(load(good_img, lbl),
               {good_img.string(), lbl.string(), "4 images", "5 labels", "expected equal counts"});

  b = idx_images(4, 3, 3);
  b.resize(b.size() - 1);
  write_file(img, b);
  expect_error(load(img, good_lbl), {img.string(), "truncated", "expected 52"});
  write_file(img, Bytes{0, 0, 8, 3, 0, 0});  // header cut short
  expect_error(load(img, good_lbl), {img.string(), "truncated header", "expected at least 16"});
  write_file(img, Bytes{0, 0});
  expect_error(load(img, good_lbl), {img.string(), "truncated"});
  b = idx_images(4, 3, 3);
  b.push_back(0);
  write_file(img, b);
  expect_error(load(img, good_lbl), {img.string(), "trailing bytes", "expected 52"});
  b = idx_images(4, 3, 3);  // dims that overflow 64 bits
  for (int k = 4; k < 16; ++k) b[static_cast<std::size_t>(k)] = 0xff;
  write_file(img, b);
  expect_error(load(img, good_lbl), {img.string(), "overflow"});

  expect_error(load(dir.path / "nope", good_lbl), {(dir.path / "nope").string(), "not found"});
  expect_error(load(good_img, dir.path / "nope"), {(dir.path / "nope").string(), "not found"});
  expect_error([&] { IdxDataset::open(dir.path, Split::train); },
               {(dir.path / "train-images-idx3-ubyte.gz").string(), "not found"});

  const fs::path gz = dir.path / "img.gz";
  write_file(gz, Bytes{0x1f, 0x8b, 8, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16});
  expect_error(load(gz, good_lbl), {gz.string(), "gzip"});
  Bytes z = gzip(idx_images(40, 8, 8));
  z.resize(z.size() / 2);
  write_file(gz, z);
  expect_error(load(gz, good_lbl), {gz.string(), "truncated gzip"});
  z = gzip(idx_images(4, 3, 3));
  z.push_back(0x42);
  write_file(gz, z);
  expect_error(load(gz, good_lbl), {gz.string(), "trailing bytes"});

  // A stream that inflates past what its header announces is stopped there: 4 images of 3x3
  // (52 bytes) followed by 64 MiB of zeros. With a bad header it stops at the header.
  Bytes bomb = idx_images(4, 3, 3);
  bomb.resize(bomb.size() + (64u << 20), 0);
  write_file(gz, gzip(bomb));
  expect_error(load(gz, good_lbl),
               {gz.string(), "inflates past 52 bytes, the size its header announces"});
  bomb[3] = 0x01;
  write_file(gz, gzip(bomb));
  expect_error(load(gz, good_lbl), {gz.string(), "bad magic 0x00000801"});
}

TEST_CASE("CIFAR-10 batches: splits, layout and corruptions") {
  TempDir dir;
  write_cifar_batches(dir.path, 2, 3);  // records 0..9 in the train split, 3 in the test split
  const CifarDataset train = CifarDataset::open(dir.path, Split::train);
  REQUIRE(train.size() == 10);
  for (std::int64_t i = 0; i < 10; ++i) {
    const Example ex = train.get(i);
    CHECK(ex.label == i % 10);
    CHECK(ex.image.shape() == tensor::Shape{3, 32, 32});
    const auto px = ex.image.to_vector<std::uint8_t>();
    CHECK(px[0] == i % 251);
    CHECK(px[1024 + 5] == (i + 1029) % 251);  // green plane
    CHECK(px[3071] == (i + 3071) % 251);
  }
  CHECK(CifarDataset::open(dir.path, Split::test).size() == 3);

  const fs::path bad = dir.path / "bad.bin";
  Bytes b = cifar_records(2, 0);
  b.pop_back();
  write_file(bad, b);
  expect_error([&] { CifarDataset ds({bad}); }, {bad.string(), "not a positive multiple", "3073"});
  write_file(bad, Bytes{});
  expect_error([&] { CifarDataset ds({bad}); }, {bad.string(), "3073"});
  b = cifar_records(2, 0);
  b[3073] = 10;
  write_file(bad, b);
  expect_error([&] { CifarDataset ds({bad}); }, {bad.string(), "record 1", "label 10", "0..9"});
  fs::remove(dir.path / "data_batch_3.bin");
  expect_error([&] { CifarDataset::open(dir.path, Split::train); },
               {(dir.path / "data_batch_3.bin").string(), "not found"});
}

namespace {

bool fashion_mnist_installed() {
  return fs::exists(fs::path(kDefaultDataDir) / "train-images-idx3-ubyte.gz");
}

}  // namespace

TEST_CASE("the default directory: Fashion-MNIST, or an error saying how to install it") {
  if (fashion_mnist_installed()) {
    CHECK(IdxDataset::open().size() == 60000);
  } else {
    expect_error([] { IdxDataset::open(); },
                 {kDefaultDataDir, "apt-get install dataset-fashion-mnist"});
  }
}

TEST_CASE("real Fashion-MNIST from the default directory" *
          doctest::skip(!fashion_mnist_installed()) *
          doctest::description("needs Fashion-MNIST in /usr/share/datasets/fashion-mnist "
                               "(apt-get install dataset-fashion-mnist)")) {
  const IdxDataset train = IdxDataset::open(kDefaultDataDir, Split::train);
  const IdxDataset test = IdxDataset::open(kDefaultDataDir, Split::test);
  CHECK(train.size() == 60000);
  CHECK(test.size() == 10000);
  CHECK(train.rows() == 28);
  CHECK(train.cols() == 28);
  for (const auto* ds : {&train, &test}) {
    const std::set<std::uint8_t> labels(ds->labels().begin(), ds->labels().end());
    CHECK(labels.size() == 10);
    CHECK(*labels.rbegin() == 9);
  }
  CHECK(train.get(59999).image.shape() == tensor::Shape{1, 28, 28});
}
