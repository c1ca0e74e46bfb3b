// TensorBoard event files, written without TensorBoard or protobuf: `tensorboard --logdir runs`
// shows a run's curves. A file is a sequence of TFRecords (the data's length as a little-endian
// u64, that length's masked CRC-32C, the data, the data's masked CRC-32C), each holding one
// serialized tensorflow.Event: the first carries file_version "brain.Event:2", every other one
// a wall time, a step and a Summary of one simple_value scalar under its tag.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace ringlet::trainer {

// CRC-32C (Castagnoli, reflected, as TFRecord and iSCSI use): crc32c("123456789") = 0xE3069283.
std::uint32_t crc32c(const void* data, std::size_t size);
// TFRecord's masking: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
std::uint32_t masked_crc32c(const void* data, std::size_t size);

class EventWriter {
 public:
  // Creates dir/events.out.tfevents.<unix seconds>.<host>.<pid>.<n> (n: the first free one)
  // and writes its file_version event.
  explicit EventWriter(const std::filesystem::path& dir);

  // One scalar at a step; flushed at once, so TensorBoard sees a running job's curves.
  void scalar(const std::string& tag, double value, std::int64_t step);
  const std::filesystem::path& path() const { return path_; }

 private:
  void write_record(const std::string& data);

  std::filesystem::path path_;
  std::ofstream out_;
};

}  // namespace ringlet::trainer
