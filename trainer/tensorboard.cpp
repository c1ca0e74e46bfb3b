// TFRecord framing and the three protobuf messages an event file needs, encoded by hand
// (tensorboard.h): Event {1: wall_time double, 2: step int64, 3: file_version string,
// 5: summary Summary}, Summary {1: repeated Value value}, Value {1: tag string,
// 2: simple_value float}.
#include "trainer/tensorboard.h"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>

#include "core/error.h"
#include "core/host.h"

namespace ringlet::trainer {

namespace {

std::array<std::uint32_t, 256> crc32c_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[i] = c;
  }
  return table;
}

// Protobuf's wire format: varints, and fields by number and wire type.
void put_varint(std::string& out, std::uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

template <class T>
void put_fixed(std::string& out, T value) {  // little-endian, as on x86-64
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

void put_bytes_field(std::string& out, int field, const std::string& bytes) {
  put_varint(out, static_cast<std::uint64_t>(field) << 3 | 2);  // length-delimited
  put_varint(out, bytes.size());
  out += bytes;
}

std::string event_header(double wall_time, std::int64_t step) {
  std::string event;
  put_varint(event, 1 << 3 | 1);  // wall_time: 64-bit
  put_fixed(event, wall_time);
  put_varint(event, 2 << 3 | 0);  // step: varint
  put_varint(event, static_cast<std::uint64_t>(step));
  return event;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  const std::string name = core::host_name();
  return name == "?" ? "localhost" : name;
}

}  // namespace

std::uint32_t crc32c(const void* data, std::size_t size) {
  static const std::array<std::uint32_t, 256> table = crc32c_table();
  const auto* bytes = static_cast<const unsigned char*>(data);
  std::uint32_t crc = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < size; ++i) crc = table[(crc ^ bytes[i]) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

std::uint32_t masked_crc32c(const void* data, std::size_t size) {
  const std::uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

EventWriter::EventWriter(const std::filesystem::path& dir) {
  const auto seconds = static_cast<long long>(now_seconds());
  const std::string stem = "events.out.tfevents." + std::to_string(seconds) + "." + host_name() +
                           "." + std::to_string(::getpid()) + ".";
  for (int n = 0; path_.empty() || std::filesystem::exists(path_); ++n) {
    path_ = dir / (stem + std::to_string(n));
  }
  out_.open(path_, std::ios::binary);
  RINGLET_CHECK(out_.good(), Error, "cannot create the event file ", path_.string(), ": ",
                core::errno_text());
  std::string event = event_header(now_seconds(), 0);
  put_bytes_field(event, 3, "brain.Event:2");
  write_record(event);
}

void EventWriter::scalar(const std::string& tag, double value, std::int64_t step) {
  std::string summary_value;
  put_bytes_field(summary_value, 1, tag);
  put_varint(summary_value, 2 << 3 | 5);  // simple_value: 32-bit
  put_fixed(summary_value, static_cast<float>(value));
  std::string summary;
  put_bytes_field(summary, 1, summary_value);
  std::string event = event_header(now_seconds(), step);
  put_bytes_field(event, 5, summary);
  write_record(event);
}

void EventWriter::write_record(const std::string& data) {
  std::string record;
  const std::uint64_t length = data.size();
  put_fixed(record, length);
  put_fixed(record, masked_crc32c(&length, sizeof length));
  record += data;
  put_fixed(record, masked_crc32c(data.data(), data.size()));
  out_.write(record.data(), static_cast<std::streamsize>(record.size()));
  out_.flush();
  RINGLET_CHECK(out_.good(), Error, "cannot write the event file ", path_.string(), ": ",
                core::errno_text());
}

}  // namespace ringlet::trainer
