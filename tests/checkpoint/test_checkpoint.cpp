// checkpoint/safetensors: round trips of every dtype (f16/bf16, 0-d and empty tensors
// included) with metadata, the atomic write (no temporary file left, a failed write keeps the
// old file), every corruption as a CheckpointError naming the file, and PyTorch reading a
// written file through tests/golden/read_safetensors.py when /usr/bin/python3 has torch.
// checkpoint/checkpoint: a training checkpoint whose metadata or tensors were tampered
// with (numbers out of range or not numbers, another dtype, a missing optimizer state, a
// negative dampening) is refused naming the file and what is wrong.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "checkpoint/checkpoint.h"
#include "checkpoint/safetensors.h"
#include "nn/linear.h"
#include "nn/sgd.h"
#include "same_bytes.h"
#include "temp_dir.h"
#include "tensor/ops.h"
#include "tensor/ops/creation.h"

using namespace ringlet;
using namespace ringlet::checkpoint;
using tensor::Tensor;
namespace fs = std::filesystem;
namespace st = ringlet::checkpoint::safetensors;

namespace {

using ringlet::testing::TempDir;

std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  return names;
}

template <class T>
Tensor filled(const tensor::Shape& shape, const std::function<T(std::int64_t)>& value) {
  Tensor t = Tensor::empty(shape, core::dtype_of<T>());
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<T>()[i] = value(i);
  return t;
}

st::NamedTensors sample_tensors() {
  return {
      {"conv.weight",
       filled<float>({2, 3}, [](auto i) { return 0.25f * static_cast<float>(i) - 1; })},
      {"f64", filled<double>({4}, [](auto i) { return 1.0 / static_cast<double>(i + 3); })},
      {"half",
       filled<core::Half>(
           {3},
           [](auto i) { return core::Half{core::float_to_half(0.5f + static_cast<float>(i))}; })},
      {"bfloat", filled<core::BFloat16>({2, 2},
                                        [](auto i) {
                                          return core::BFloat16{
                                              core::float_to_bf16(-2.0f * static_cast<float>(i))};
                                        })},
      {"steps", filled<std::int64_t>({5}, [](auto i) { return (i - 2) * 1000000000000LL; })},
      {"i32", filled<std::int32_t>({2}, [](auto i) { return static_cast<std::int32_t>(-7 + i); })},
      {"pixels",
       filled<std::uint8_t>({7}, [](auto i) { return static_cast<std::uint8_t>(250 + i % 6); })},
      {"scalar", tensor::scalar_tensor(3.5)},
      {"empty", Tensor::empty({0, 3}, core::DType::f32)},
      {"transposed",
       filled<float>({2, 3}, [](auto i) { return static_cast<float>(i); }).transpose(0, 1)},
  };
}

bool same(const Tensor& a, const Tensor& b) {
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return ca.shape() == cb.shape() && ca.dtype() == cb.dtype() &&
         ringlet::testing::same_bytes(ca.raw_data(), cb.raw_data(), ca.nbytes());
}

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

// A file with this JSON header (unpadded) followed by `data_bytes` zero bytes.
std::string craft(const std::string& header, std::size_t data_bytes) {
  std::string out(8, '\0');
  const std::uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + std::string(data_bytes, '\0');
}

void expect_error(const fs::path& file, const std::vector<std::string>& parts) {
  try {
    st::read(file);
    FAIL("expected a CheckpointError mentioning ", parts.front());
  } catch (const CheckpointError& e) {
    const std::string what = e.what();
    CHECK_MESSAGE(what.find(file.string()) != std::string::npos, what);
    for (const auto& p : parts)
      CHECK_MESSAGE(what.find(p) != std::string::npos, what, " lacks ", p);
  }
}

}  // namespace

TEST_CASE("round trip of every dtype, 0-d and empty tensors, and metadata") {
  TempDir dir;
  const fs::path file = dir.path / "model.safetensors";
  const auto tensors = sample_tensors();
  const st::Metadata meta{
      {"epoch", "3"}, {"step", "2811"}, {"config", R"({"lr": 0.05})"}, {"rng", ""}};
  st::write(file, tensors, meta);
  const st::File got = st::read(file);
  CHECK(got.metadata == meta);
  REQUIRE(got.tensors.size() == tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    CAPTURE(tensors[i].first);
    CHECK(got.tensors[i].first == tensors[i].first);  // written order is kept
    CHECK(same(got.tensors[i].second, tensors[i].second));
  }
  CHECK(got.at("scalar").dim() == 0);
  CHECK(got.at("scalar").item() == 3.5);
  CHECK(got.at("transposed").to_vector<float>() == std::vector<float>{0, 3, 1, 4, 2, 5});
  CHECK_THROWS_WITH_AS(got.at("nope"), doctest::Contains("conv.weight"), CheckpointError);
  // Data starts 8-byte aligned, and the header is valid JSON padded with spaces.
  const std::string bytes = read_bytes(file);
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  CHECK(n % 8 == 0);
  const auto header = nlohmann::json::parse(bytes.substr(8, n));
  CHECK(header["half"]["dtype"] == "F16");
  CHECK(header["bfloat"]["dtype"] == "BF16");
  CHECK(header["empty"]["data_offsets"][0] == header["empty"]["data_offsets"][1]);
  // No metadata of the caller's: none read back (the file's holds only the checksum).
  st::write(file, {{"x", tensor::ones({2})}});
  CHECK(st::read(file).metadata.empty());
  st::write(file, {});
  CHECK(st::read(file).tensors.empty());
}

TEST_CASE("the write is atomic: no temporary file, a failed write keeps the old file") {
  TempDir dir;
  const fs::path file = dir.path / "ckpt.safetensors";
  st::write(file, sample_tensors(), {{"epoch", "1"}});
  CHECK(listing(dir.path) == std::vector<std::string>{"ckpt.safetensors"});
  st::write(file, {{"a", tensor::ones({3})}}, {{"epoch", "2"}});  // replaces it
  CHECK(listing(dir.path) == std::vector<std::string>{"ckpt.safetensors"});
  CHECK(st::read(file).metadata.at("epoch") == "2");
  const std::string before = read_bytes(file);
  CHECK_THROWS_WITH_AS(st::write(file, {{"a", tensor::ones({1})}, {"a", tensor::ones({1})}}),
                       doctest::Contains("duplicate tensor name 'a'"), CheckpointError);
  CHECK_THROWS_AS(st::write(file, {{"__metadata__", tensor::ones({1})}}), CheckpointError);
  CHECK_THROWS_AS(st::write(file, {{"undefined", Tensor()}}), CheckpointError);
  CHECK(read_bytes(file) == before);
  CHECK(listing(dir.path) == std::vector<std::string>{"ckpt.safetensors"});
  CHECK_THROWS_WITH_AS(st::write(dir.path / "no" / "such" / "dir.safetensors", {}),
                       doctest::Contains("no/such/dir.safetensors"), CheckpointError);
}

TEST_CASE("corrupt files are CheckpointErrors naming the file and the tensor") {
  TempDir dir;
  const fs::path good = dir.path / "good.safetensors", bad = dir.path / "bad.safetensors";
  st::write(good, sample_tensors(), {{"epoch", "1"}});
  const std::string bytes = read_bytes(good);

  expect_error(dir.path / "missing.safetensors", {"cannot open"});
  write_bytes(bad, bytes.substr(0, 5));
  expect_error(bad, {"truncated", "8-byte header length"});
  write_bytes(bad, bytes.substr(0, bytes.size() - 3));  // data cut short
  expect_error(bad, {"tensor '", "out of range"});
  write_bytes(bad, bytes + "xyz");  // bytes no tensor covers
  expect_error(bad, {"the file holds"});
  std::string huge = bytes;
  const std::uint64_t claim = 1ull << 60;  // must be refused before any allocation
  std::memcpy(huge.data(), &claim, 8);
  write_bytes(bad, huge);
  expect_error(bad, {"bad header length 1152921504606846976"});

  write_bytes(bad, craft(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]})", 4));
  expect_error(bad, {"bad JSON header"});
  write_bytes(bad, craft("[1, 2]", 0));
  expect_error(bad, {"not an object"});
  write_bytes(bad,
              craft(R"({"a": {"dtype": "F8_E4M3", "shape": [1], "data_offsets": [0, 1]}})", 1));
  expect_error(bad, {"tensor 'a'", "unsupported dtype 'F8_E4M3'"});
  write_bytes(bad, craft(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 12]}})", 12));
  expect_error(bad, {"tensor 'a'", "span 12 bytes", "needs 8"});
  write_bytes(bad, craft(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", 4));
  expect_error(bad, {"tensor 'a'", "out of range for 4 data bytes"});
  write_bytes(bad, craft(R"({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4));
  expect_error(bad, {"tensor 'a'", "non-negative integers"});
  write_bytes(bad, craft(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}})", 8));
  expect_error(bad, {"tensor 'a'", "out of range"});
  write_bytes(bad, craft(R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                             "b": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}})",
                         6));
  expect_error(bad, {"tensor 'b' overlaps tensor 'a'"});
  write_bytes(bad, craft(R"({"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},
                             "b": {"dtype": "U8", "shape": [2], "data_offsets": [3, 5]}})",
                         5));
  expect_error(bad, {"gap of 1 bytes before tensor 'b'"});
  write_bytes(bad, craft(R"({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
                             "a": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}})",
                         2));
  expect_error(bad, {"duplicate tensor name 'a'"});
  write_bytes(bad,
              craft(R"({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1], "x": 1}})", 1));
  expect_error(bad, {"tensor 'a'", "unexpected key 'x'"});
  write_bytes(bad, craft(R"({"a": {"shape": [1], "data_offsets": [0, 1]}})", 1));
  expect_error(bad, {"tensor 'a'", "missing string 'dtype'"});
  write_bytes(bad, craft(R"({"__metadata__": {"epoch": 3}})", 0));
  expect_error(bad, {"metadata 'epoch' is not a string"});
  write_bytes(
      bad,
      craft(
          R"({"a": {"dtype": "F64", "shape": [4294967296, 4294967296, 4294967296], "data_offsets": [0, 8]}})",
          8));
  expect_error(bad, {"tensor 'a'", "overflows"});
}

TEST_CASE("every file carries a checksum: a flipped data byte is refused naming the tensor") {
  TempDir dir;
  const fs::path good = dir.path / "good.safetensors", bad = dir.path / "bad.safetensors";
  st::write(good, sample_tensors(), {{"epoch", "1"}});
  const std::string bytes = read_bytes(good);
  std::uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  const auto header = nlohmann::json::parse(bytes.substr(8, header_len));
  REQUIRE(header.at("__metadata__").contains("ringlet_crc32"));
  // One bit of every tensor's data in turn: each is caught and named with its byte range.
  for (const auto& named : sample_tensors()) {
    const std::string& name = named.first;  // not a structured binding: CAPTURE takes it
    const auto offsets = header.at(name).at("data_offsets").get<std::vector<std::uint64_t>>();
    if (offsets[1] == offsets[0]) continue;  // the empty tensor has no bytes
    CAPTURE(name);
    std::string flipped = bytes;
    flipped[8 + header_len + offsets[1] - 1] ^= 0x10;
    write_bytes(bad, flipped);
    expect_error(
        bad, {"tensor '" + name + "'",
              "data bytes [" + std::to_string(offsets[0]) + ", " + std::to_string(offsets[1]) + ")",
              "fails its CRC-32 check", "damaged"});
  }
  // A damaged checksum value is named as such.
  std::string text = bytes;
  const std::size_t at = text.find("ringlet_crc32\":\"") + 16;
  text[at] = 'z';
  write_bytes(bad, text);
  expect_error(bad, {"ringlet_crc32", "not an 8-digit hex CRC-32"});
}

TEST_CASE("a file without a checksum (PyTorch's) loads, with a one-line notice") {
  TempDir dir;
  const fs::path file = dir.path / "foreign.safetensors";
  std::string data(8, '\0');
  const float values[2] = {1.5f, -2.0f};
  std::memcpy(data.data(), values, 8);
  std::string bytes = craft(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 0);
  write_bytes(file, bytes + data);
  std::ostringstream notice;
  std::streambuf* saved = std::cerr.rdbuf(notice.rdbuf());
  const st::File got = st::read(file);
  st::read(file);  // once per file
  std::cerr.rdbuf(saved);
  CHECK(got.at("w").to_vector<float>() == std::vector<float>{1.5f, -2.0f});
  CHECK(notice.str() == "notice: " + file.string() +
                            " carries no 'ringlet_crc32' checksum (written elsewhere, or by an "
                            "older ringlet): its data is loaded unverified\n");
}

namespace {

// `bytes` (a whole file) with its JSON header rewritten by `edit`, the data unchanged.
std::string with_header(const std::string& bytes,
                        const std::function<void(nlohmann::ordered_json&)>& edit) {
  std::uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  auto header = nlohmann::ordered_json::parse(bytes.substr(8, header_len));
  edit(header);
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  const std::uint64_t n = text.size();
  std::memcpy(out.data(), &n, 8);
  return out + text + bytes.substr(8 + header_len);
}

}  // namespace

TEST_CASE("every metadata value is under a checksum: any altered, added or removed key is named") {
  TempDir dir;
  const fs::path good = dir.path / "good.safetensors", bad = dir.path / "bad.safetensors";
  const st::Metadata metadata{{"epoch", "1"},
                              {"step", "12"},
                              {"config", R"({"lr": 0.05, "seed": 3})"},
                              {"optim.param_groups.0.lr", "0.050000000000000003"},
                              {"schedule.last_epoch", "1"}};
  st::write(good, sample_tensors(), metadata);
  const std::string bytes = read_bytes(good);
  CHECK(st::read(good).metadata == metadata);
  for (const auto& entry : metadata) {
    const std::string key = entry.first;  // not a structured binding: CAPTURE takes it
    CAPTURE(key);
    write_bytes(bad, with_header(bytes, [&](nlohmann::ordered_json& h) {
                  std::string value = h["__metadata__"][key];
                  value.back() = value.back() == '1' ? '2' : '1';
                  h["__metadata__"][key] = value;
                }));
    expect_error(bad, {"metadata '" + key + "' fails its CRC-32 check", "altered or damaged"});
    CHECK_THROWS_AS(st::read_metadata(bad), CheckpointError);
  }
  write_bytes(bad, with_header(bytes, [](nlohmann::ordered_json& h) {
                h["__metadata__"]["resumed"] = "yes";
              }));
  expect_error(bad, {"metadata 'resumed' is not covered by the file's checksum"});
  write_bytes(
      bad, with_header(bytes, [](nlohmann::ordered_json& h) { h["__metadata__"].erase("step"); }));
  expect_error(bad, {"metadata 'step' is missing (the file's checksum covers it)"});
  write_bytes(bad, with_header(bytes, [](nlohmann::ordered_json& h) {
                h["__metadata__"]["ringlet_metadata_crc32"] = "[1, 2]";
              }));
  expect_error(bad, {"'ringlet_metadata_crc32' is not a JSON object of CRC-32s"});
}

namespace {

// Asked once, when the test below registers.
bool python_has_torch() {
  return std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0;
}

}  // namespace

// The C++ round trips above are the main test; this one needs PyTorch.
TEST_CASE(
    "PyTorch reads a written checkpoint (tests/golden/read_safetensors.py)" *
    doctest::skip(!python_has_torch()) *
    doctest::description("needs /usr/bin/python3 with torch (apt-get install python3-torch)")) {
  TempDir dir;
  const fs::path file = dir.path / "torch.safetensors";
  const auto tensors = sample_tensors();
  st::write(file, tensors, {{"epoch", "4"}, {"config", R"({"model": "fmnist_cnn"})"}});
  const std::string cmd = "/usr/bin/python3 " RINGLET_SOURCE_ROOT
                          "/tests/golden/read_safetensors.py '" +
                          file.string() + "' 2>&1";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string output;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, pipe)) output.append(buf, n);
  REQUIRE_MESSAGE(::pclose(pipe) == 0, output);
  const auto got = nlohmann::json::parse(output);
  CHECK(got["metadata"]["epoch"] == "4");
  CHECK(got["metadata"]["config"] == R"({"model": "fmnist_cnn"})");
  REQUIRE(got["tensors"].size() == tensors.size());
  for (const auto& entry : tensors) {
    const auto& name = entry.first;
    const auto& t = entry.second;
    CAPTURE(name);
    const auto& info = got["tensors"][name];
    CHECK(info["shape"].get<tensor::Shape>() == t.shape());
    double sum = 0;
    for (double v : t.to_vector<double>()) sum += v;
    CHECK(info["sum"].get<double>() == doctest::Approx(sum).epsilon(1e-12));
  }
  CHECK(got["tensors"]["half"]["dtype"] == "torch.float16");
  CHECK(got["tensors"]["bfloat"]["dtype"] == "torch.bfloat16");
  CHECK(got["tensors"]["pixels"]["dtype"] == "torch.uint8");
}

namespace {

// A Linear layer and its SGD (momentum 0.9) after one step, saved as a training checkpoint.
struct SavedRun {
  tensor::Generator gen{3};
  nn::Linear model{4, 2, gen};
  nn::SGD optimizer{model.parameters(), {.lr = 0.1, .momentum = 0.9}};
  explicit SavedRun(const fs::path& file) {
    tensor::sum(model.forward(tensor::ones({3, 4}))).backward();
    optimizer.step();
    CheckpointInfo info;
    info.epoch = 2;
    info.step = 7;
    info.config = R"({"model": "x"})";
    save_checkpoint(file, model, &optimizer, info);
  }
};

}  // namespace

TEST_CASE("a tampered training checkpoint is refused, naming the file and what is wrong") {
  TempDir dir;
  const fs::path file = dir.path / "checkpoint.safetensors";
  SavedRun saved(file);
  const st::File original = st::read(file);
  {
    SavedRun fresh(dir.path / "other.safetensors");
    const CheckpointInfo info = load_checkpoint(file, fresh.model, &fresh.optimizer);
    CHECK(info.epoch == 2);
    CHECK(info.step == 7);
  }
  struct Case {
    std::string what;
    std::function<void(st::File&)> tamper;
    std::string message;
  };
  const auto set_meta = [](const std::string& key, const std::string& value) {
    return [=](st::File& f) { f.metadata[key] = value; };
  };
  const std::vector<Case> cases = {
      {"a negative epoch", set_meta("epoch", "-1"), "metadata 'epoch' is -1, out of range"},
      {"an epoch past 2^31", set_meta("epoch", "4294967296"), "out of range [0, 2147483647]"},
      {"an epoch that is no number", set_meta("epoch", "3 "), "'3 ', not a whole number"},
      {"a negative step", set_meta("step", "-5"), "metadata 'step' is -5, out of range"},
      {"a momentum that is no number", set_meta("optim.param_groups.0.momentum", "0.9x"),
       "metadata 'optim.param_groups.0.momentum' is '0.9x', not a finite number"},
      {"a nan lr", set_meta("optim.param_groups.0.lr", "nan"), "not a finite number"},
      {"a negative dampening", set_meta("optim.param_groups.0.dampening", "-0.5"),
       "invalid dampening -0.5 (must be in [0, 1])"},
      {"a weight of another dtype",
       [](st::File& f) {
         for (auto& [name, t] : f.tensors) {
           if (name == "model.weight") t = t.to(core::DType::f64);
         }
       },
       "tensor 'model.weight' is F64 but the model's is F32"},
      {"a missing optimizer state",
       [](st::File& f) {
         std::erase_if(f.tensors,
                       [](const auto& e) { return e.first.rfind("optim.state.1.", 0) == 0; });
       },
       "SGD state for 1 of 2 parameters: parameter 1's is missing"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    st::File tampered = original;
    c.tamper(tampered);
    st::write(file, tampered.tensors, tampered.metadata);
    SavedRun fresh(dir.path / "other.safetensors");
    try {
      load_checkpoint(file, fresh.model, &fresh.optimizer);
      FAIL("loaded a checkpoint with ", c.what);
    } catch (const core::ValueError& e) {
      const std::string what = e.what();
      CHECK_MESSAGE(what.find(c.message) != std::string::npos, what);
      CHECK_MESSAGE(what.find(file.string()) != std::string::npos, what);
    }
  }
}
