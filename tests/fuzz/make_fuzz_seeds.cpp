// Writes the seed corpus of every fuzz target (tests/fuzz/corpus/<target>/) with the project's
// own writers, so each seed is an input the readers accept: `make_fuzz_seeds DIR`. The
// corpus is committed; scripts/fuzz.sh --seeds rewrites it after a format changes.
#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/safetensors.h"
#include "nn/adam.h"
#include "nn/linear.h"
#include "nn/sgd.h"
#include "tensor/generator.h"
#include "tensor/ops.h"
#include "transport/shm/segment.h"
#include "transport/store_wire.h"
#include "transport/tcp/handshake.h"

namespace {

namespace fs = std::filesystem;
using namespace ringlet;
using Bytes = std::string;
using namespace std::string_literals;

fs::path g_root;

void put(const std::string& target, const std::string& name, const Bytes& bytes) {
  const fs::path dir = g_root / target;
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

Bytes read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

template <class T>
void append(Bytes& out, const T& value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

Bytes gzip(const Bytes& in) {
  z_stream zs{};
  if (deflateInit2(&zs, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) std::abort();
  Bytes out(deflateBound(&zs, in.size()) + 32, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  if (deflate(&zs, Z_FINISH) != Z_STREAM_END) std::abort();
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

void store_wire_seeds() {
  using namespace transport::store_wire;
  const std::string delta(8, '\x01');
  const auto request = [](Op op, std::vector<std::string_view> args) {
    return encode_frame(static_cast<std::uint8_t>(op), args, 5000);
  };
  put("store_wire", "set", request(Op::set, {"rank/0", "127.0.0.1:29500"}));
  put("store_wire", "get", request(Op::get, {"rank/0"}));
  put("store_wire", "wait", request(Op::wait, {"a", "b", "c"}));
  put("store_wire", "add", request(Op::add, {"counter", delta}));
  put("store_wire", "compare_set", request(Op::compare_set, {"k", "", "v"}));
  put("store_wire", "delete", request(Op::delete_key, {"k"}));
  put("store_wire", "num_keys", request(Op::num_keys, {}));
  put("store_wire", "reply_error",
      encode_frame(static_cast<std::uint8_t>(Status::error), {"add on key 'k' overflows"}, 0));
}

void tcp_handshake_seeds() {
  using namespace transport::tcp;
  Hello hello;
  hello.job_token = 0x5eed5eed5eed5eedULL;
  hello.rank = 1;
  hello.peer_rank = 0;
  hello.socket_count = 2;
  FrameHeader frame;
  frame.seq = 3;
  frame.offset = 16;
  frame.length = 16;
  frame.total = 64;
  Bytes bytes;
  append(bytes, hello);
  append(bytes, frame);
  append(bytes, std::uint64_t{1024});
  bytes += '\0';  // local rank 0
  bytes += '\1';  // world size 2
  put("tcp_handshake", "hello_and_frame", bytes);
}

void shm_segment_seeds() {
  setenv("RINGLET_SHM_RING_BYTES", "4096", 1);
  const auto segment = transport::ShmSegment::create(0, 1);
  put("shm_segment", "segment_4096", read_all(fs::path("/dev/shm") / segment.name().substr(1)));
}

void checkpoint_seeds() {
  const fs::path file = g_root / "checkpoint.tmp";
  tensor::Generator gen{3};
  nn::Linear model{4, 2, gen};
  nn::SGD sgd{model.parameters(), {.lr = 0.1, .momentum = 0.9}};
  tensor::sum(model.forward(tensor::ones({3, 4}))).backward();
  sgd.step();
  const auto position = [](std::int64_t epoch, std::int64_t step, const char* config) {
    checkpoint::CheckpointInfo info;
    info.epoch = epoch;
    info.step = step;
    info.config = config;
    return info;
  };
  checkpoint::save_checkpoint(file, model, &sgd,
                              position(2, 7, R"({"model": "x", "epochs": 3, "lr": 0.1})"));
  put("checkpoint", "linear_sgd", read_all(file));
  nn::Adam adam{model.parameters(), {}};
  checkpoint::save_checkpoint(file, model, &adam, position(1, 3, "{}"));
  put("checkpoint", "linear_adam", read_all(file));
  checkpoint::safetensors::write(file,
                                 {{"a", tensor::ones({2, 3})},
                                  {"b", tensor::ones({4}).to(core::DType::bf16)},
                                  {"c", tensor::ones({1, 2}).to(core::DType::u8)}},
                                 {{"epoch", "1"}, {"note", "x"}});
  put("checkpoint", "three_dtypes", read_all(file));
  fs::remove(file);
}

Bytes be32(std::uint32_t v) { return {char(v >> 24), char(v >> 16), char(v >> 8), char(v)}; }

void idx_seeds() {
  const Bytes images = be32(0x803) + be32(3) + be32(2) + be32(2) + Bytes(12, '\x7f');
  const Bytes labels = be32(0x801) + be32(3) + Bytes("\x01\x02\x09", 3);
  const auto pair = [](const Bytes& i, const Bytes& l) {
    Bytes out;
    append(out, static_cast<std::uint32_t>(i.size()));
    return out + i + l;
  };
  put("idx", "raw", pair(images, labels));
  put("idx", "gzip", pair(gzip(images), gzip(labels)));
}

void cifar_seeds() {
  Bytes records;
  for (const char label : {'\3', '\11'}) records += label + Bytes(3072, label);
  put("cifar", "two_records", records);
}

void text_seeds(const fs::path& source_root) {
  put("config", "small",
      "{\"epochs\": 2, \"lr\": 0.05 /* c */}\0--batch_size\0"
      "32"s);
  put("config", "overrides", "{}\0--optimizer=adam\0--lr_schedule\0cosine"s);
  for (const auto& entry : fs::directory_iterator(source_root / "recipes")) {
    if (entry.path().extension() == ".json") {
      put("config", entry.path().filename().string(), read_all(entry.path()));
    }
  }
  put("hosts", "list_and_file", "h1,h2,[::1]\0# nodes\nnode1\n\n  node2  \n"s);
  const auto env = [](std::initializer_list<const char*> parts) {
    Bytes out;
    for (const char* p : parts) out += Bytes(p) + '\0';
    return out;
  };
  put("env", "torchrun",
      env({"", "RANK=1", "WORLD_SIZE=4", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2",
           "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29500"}));
  put("env", "slurm",
      env({"", "SLURM_PROCID=3", "SLURM_NTASKS=4", "SLURM_LOCALID=1",
           "SLURM_NODELIST=node[01-02,07],gpu5", "SLURM_TASKS_PER_NODE=2(x2)", "SLURM_NODEID=1"}));
  put("env", "ompi",
      env({"", "OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=3", "OMPI_COMM_WORLD_LOCAL_RANK=0",
           "OMPI_COMM_WORLD_LOCAL_SIZE=1", "MASTER_ADDR=::1"}));
  put("env", "tcp", env({"tcp://[::1]:29500", "RANK=0", "WORLD_SIZE=2"}));
  put("env", "file", env({"file:///tmp/store", "RANK=0", "WORLD_SIZE=1", "RINGLET_NSOCKS=-7"}));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: make_fuzz_seeds CORPUS_DIR SOURCE_ROOT\n";
    return 2;
  }
  g_root = argv[1];
  store_wire_seeds();
  tcp_handshake_seeds();
  shm_segment_seeds();
  checkpoint_seeds();
  idx_seeds();
  cifar_seeds();
  text_seeds(argv[2]);
  std::cout << "seeds written under " << g_root << "\n";
  return 0;
}
