// safetensors reading and writing. Reading trusts nothing: every size in the header is
// checked against the file size with overflow-safe arithmetic before any allocation, so a
// corrupt or hostile header yields a CheckpointError, never a huge allocation or a read past
// the end. Writing goes through a temporary file + fsync + rename + directory fsync.
#include "checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "checkpoint/checksum.h"
#include "core/file_io.h"

namespace ringlet::checkpoint::safetensors {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host would need byte swaps");

namespace {

namespace fs = std::filesystem;
using tensor::Tensor;

// The reference implementation refuses headers over 100 MB; so do we.
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;

[[noreturn]] void fail(const fs::path& path, const std::string& what) {
  throw CheckpointError(path.string() + ": " + what);
}

std::string errno_text() { return std::strerror(errno); }

bool dtype_from_name(const std::string& name, core::DType& out) {
  static const std::pair<const char*, core::DType> kNames[] = {
      {"F32", core::DType::f32},   {"F64", core::DType::f64}, {"F16", core::DType::f16},
      {"BF16", core::DType::bf16}, {"I64", core::DType::i64}, {"I32", core::DType::i32},
      {"U8", core::DType::u8}};
  for (const auto& [n, d] : kNames) {
    if (name == n) {
      out = d;
      return true;
    }
  }
  return false;
}

// Owns a file descriptor; closes it on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

void write_all(const fs::path& path, int fd, const void* data, std::size_t bytes) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, p, std::min<std::size_t>(bytes, 1 << 30));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail(path, "write failed: " + errno_text());
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

void read_at(const fs::path& path, int fd, void* data, std::size_t bytes, std::uint64_t offset) {
  auto* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n =
        ::pread(fd, p, std::min<std::size_t>(bytes, 1 << 30), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(path, "read failed: " + errno_text());
    if (n == 0) fail(path, "unexpected end of file (was it truncated while reading?)");
    p += n;
    offset += static_cast<std::uint64_t>(n);
    bytes -= static_cast<std::size_t>(n);
  }
}

struct Entry {
  std::string name;
  core::DType dtype;
  tensor::Shape shape;
  std::uint64_t begin, end;
};

// One tensor's header entry, checked on its own; coverage is checked across entries later.
Entry parse_entry(const fs::path& path, const std::string& name, const nlohmann::json& info,
                  std::uint64_t data_bytes) {
  const std::string where = "tensor '" + name + "': ";
  if (!info.is_object()) fail(path, where + "header entry is not a JSON object");
  for (const auto& [key, value] : info.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      fail(path, where + "unexpected key '" + key + "' (expected dtype, shape, data_offsets)");
    }
  }
  Entry e{name, core::DType::f32, {}, 0, 0};
  const auto dtype = info.find("dtype");
  if (dtype == info.end() || !dtype->is_string()) fail(path, where + "missing string 'dtype'");
  if (!dtype_from_name(dtype->get<std::string>(), e.dtype)) {
    fail(path, where + "unsupported dtype '" + dtype->get<std::string>() +
                   "' (expected F32, F64, F16, BF16, I64, I32 or U8)");
  }
  const auto shape = info.find("shape");
  if (shape == info.end() || !shape->is_array()) fail(path, where + "missing array 'shape'");
  std::uint64_t bytes = core::dtype_size(e.dtype);
  for (const auto& dim : *shape) {
    if (!dim.is_number_unsigned())
      fail(path, where + "shape " + shape->dump() + " is not a list of non-negative integers");
    const auto d = dim.get<std::uint64_t>();
    if (__builtin_mul_overflow(bytes, d, &bytes) || d > static_cast<std::uint64_t>(INT64_MAX)) {
      fail(path, where + "shape " + shape->dump() + " overflows");
    }
    e.shape.push_back(static_cast<std::int64_t>(d));
  }
  const auto offsets = info.find("data_offsets");
  if (offsets == info.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned()) {
    fail(path, where + "'data_offsets' must be [begin, end] with non-negative integers");
  }
  e.begin = (*offsets)[0].get<std::uint64_t>();
  e.end = (*offsets)[1].get<std::uint64_t>();
  if (e.begin > e.end || e.end > data_bytes) {
    fail(path, where + "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                   "] out of range for " + std::to_string(data_bytes) + " data bytes");
  }
  if (e.end - e.begin != bytes) {
    fail(path, where + "data_offsets span " + std::to_string(e.end - e.begin) +
                   " bytes, but shape " + shape->dump() + " of " + dtype->get<std::string>() +
                   " needs " + std::to_string(bytes));
  }
  return e;
}

// The 8-byte little-endian length of the JSON header that follows it, checked against the
// file's size and kMaxHeaderBytes.
std::uint64_t read_header_length(const fs::path& path, int fd, std::uint64_t file_bytes) {
  if (file_bytes < 8) {
    fail(path, "truncated: " + std::to_string(file_bytes) +
                   " bytes, too short for the 8-byte header length");
  }
  std::uint64_t header_len = 0;
  read_at(path, fd, &header_len, 8, 0);
  if (header_len > file_bytes - 8 || header_len > kMaxHeaderBytes || header_len < 2) {
    fail(path, "bad header length " + std::to_string(header_len) + " for a file of " +
                   std::to_string(file_bytes) + " bytes (not a safetensors file, or truncated)");
  }
  return header_len;
}

// The JSON header: an object without duplicate top-level names, which a plain parse would
// silently merge.
nlohmann::json parse_header(const fs::path& path, const std::string& text) {
  std::set<std::string> names;
  std::string duplicate;
  const auto on_event = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& value) {
    if (depth == 1 && event == nlohmann::json::parse_event_t::key &&
        !names.insert(value.get<std::string>()).second && duplicate.empty()) {
      duplicate = value.get<std::string>();
    }
    return true;
  };
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text, on_event);
  } catch (const nlohmann::json::exception& e) {
    fail(path, std::string("bad JSON header: ") + e.what());
  }
  if (!header.is_object()) fail(path, "JSON header is not an object");
  if (!duplicate.empty()) fail(path, "duplicate tensor name '" + duplicate + "' in the header");
  return header;
}

Metadata parse_metadata(const fs::path& path, const nlohmann::json& info) {
  if (!info.is_object()) fail(path, "__metadata__ is not a JSON object");
  Metadata metadata;
  for (const auto& [key, value] : info.items()) {
    if (!value.is_string()) fail(path, "metadata '" + key + "' is not a string");
    metadata[key] = value.get<std::string>();
  }
  return metadata;
}

// The data must be covered exactly: sorted by offsets, each tensor starts where the previous
// one ended and the last ends at the end of the file. Sorts `entries`.
void check_coverage(const fs::path& path, std::vector<Entry>& entries, std::uint64_t data_bytes) {
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t expected = 0;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    if (e.begin < expected) {
      fail(path, "tensor '" + e.name + "' overlaps tensor '" + entries[i - 1].name + "'");
    }
    if (e.begin > expected) {
      fail(path, "gap of " + std::to_string(e.begin - expected) + " bytes before tensor '" +
                     e.name + "'");
    }
    expected = e.end;
  }
  if (expected != data_bytes) {
    fail(path, "tensors cover " + std::to_string(expected) + " bytes but the file holds " +
                   std::to_string(data_bytes) + " data bytes");
  }
}

}  // namespace

const char* dtype_to_name(core::DType dtype) {
  switch (dtype) {
    case core::DType::f32: return "F32";
    case core::DType::f64: return "F64";
    case core::DType::f16: return "F16";
    case core::DType::bf16: return "BF16";
    case core::DType::i64: return "I64";
    case core::DType::i32: return "I32";
    case core::DType::u8: return "U8";
  }
  return "?";
}

const Tensor& File::at(const std::string& name) const {
  for (const auto& [n, t] : tensors) {
    if (n == name) return t;
  }
  std::string names;
  for (const auto& [n, t] : tensors) names += (names.empty() ? "" : ", ") + n;
  throw CheckpointError("checkpoint has no tensor '" + name + "' (it has: " + names + ")");
}

void write(const fs::path& path, const NamedTensors& tensors, const Metadata& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  std::vector<Tensor> data;  // contiguous CPU copies, in order
  std::vector<TensorBytes> bytes_of;
  std::set<std::string> seen;
  std::uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name.empty() || name == "__metadata__") fail(path, "invalid tensor name '" + name + "'");
    if (!seen.insert(name).second) fail(path, "duplicate tensor name '" + name + "'");
    if (!t.defined()) fail(path, "tensor '" + name + "' is undefined");
    data.push_back(t.cpu().contiguous());
    const std::uint64_t bytes = data.back().nbytes();
    header[name] = {{"dtype", dtype_to_name(t.dtype())},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, offset + bytes}}};
    bytes_of.push_back({name, offset, offset + bytes, data.back().raw_data()});
    offset += bytes;
  }
  Metadata with_checksum = metadata;
  with_checksum.erase(kChecksumKey);
  with_checksum.erase(kMetadataChecksumKey);
  with_checksum[kMetadataChecksumKey] = metadata_checksum_text(with_checksum);
  with_checksum[kChecksumKey] = checksum_text(bytes_of);
  nlohmann::ordered_json full = nlohmann::ordered_json::object();
  full["__metadata__"] = with_checksum;
  full.update(header);
  std::string text = full.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-byte aligned
  const std::uint64_t header_len = text.size();

  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  const fs::path tmp = core::temporary_path(path);
  Fd file;
  file.fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (file.fd < 0) fail(path, "cannot create temporary file " + tmp.string() + ": " + errno_text());
  try {
    write_all(path, file.fd, &header_len, 8);
    write_all(path, file.fd, text.data(), text.size());
    for (const Tensor& t : data) write_all(path, file.fd, t.raw_data(), t.nbytes());
    if (::fsync(file.fd) != 0) fail(path, "fsync failed: " + errno_text());
    const int fd = file.fd;
    file.fd = -1;
    if (::close(fd) != 0) fail(path, "close failed: " + errno_text());
    if (::rename(tmp.c_str(), path.c_str()) != 0)
      fail(path, "rename from " + tmp.string() + " failed: " + errno_text());
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  // Make the rename itself durable.
  Fd d;
  d.fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d.fd < 0 || ::fsync(d.fd) != 0)
    fail(path, "fsync of directory " + dir.string() + " failed: " + errno_text());
}

namespace {

// An open file's validated header: its entries (in header order), metadata and where the data
// starts.
struct Header {
  Fd file;
  std::uint64_t header_len = 0;
  std::vector<Entry> entries;
  Metadata metadata;                    // without the checksums
  std::optional<std::string> checksum;  // the file's checksum value, where it has one
};

// Moves metadata[key] into `value`, where the metadata has it.
void take(Metadata& metadata, const char* key, std::optional<std::string>& value) {
  const auto it = metadata.find(key);
  if (it == metadata.end()) return;
  value = it->second;
  metadata.erase(it);
}

void read_header(const fs::path& path, Header& out) {
  out.file.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (out.file.fd < 0) fail(path, "cannot open checkpoint: " + errno_text());
  struct stat st {};
  if (::fstat(out.file.fd, &st) != 0) fail(path, "cannot stat: " + errno_text());
  const auto file_bytes = static_cast<std::uint64_t>(st.st_size);
  out.header_len = read_header_length(path, out.file.fd, file_bytes);
  std::string text(out.header_len, '\0');
  read_at(path, out.file.fd, text.data(), out.header_len, 8);
  const std::uint64_t data_bytes = file_bytes - 8 - out.header_len;

  const nlohmann::json header = parse_header(path, text);
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      out.metadata = parse_metadata(path, info);
      continue;
    }
    out.entries.push_back(parse_entry(path, name, info, data_bytes));
  }
  check_coverage(path, out.entries, data_bytes);
  take(out.metadata, kChecksumKey, out.checksum);
  std::optional<std::string> metadata_checksum;
  take(out.metadata, kMetadataChecksumKey, metadata_checksum);
  if (metadata_checksum) {
    verify_metadata_checksums(path, *metadata_checksum, out.metadata);
  } else if (!out.metadata.empty()) {
    notice_unverified(path, kMetadataChecksumKey, "its metadata's values are");
  }
}

}  // namespace

File read(const fs::path& path) {
  Header header;
  read_header(path, header);
  File result;
  result.metadata = std::move(header.metadata);
  std::vector<TensorBytes> bytes_of;
  for (const Entry& e : header.entries) {
    Tensor t = Tensor::empty(e.shape, e.dtype);
    if (e.end > e.begin) {
      read_at(path, header.file.fd, t.raw_data(), e.end - e.begin, 8 + header.header_len + e.begin);
    }
    bytes_of.push_back({e.name, e.begin, e.end, t.raw_data()});
    result.tensors.emplace_back(e.name, std::move(t));
  }
  if (header.checksum) {
    verify_checksums(path, *header.checksum, bytes_of);
  } else {
    notice_unverified(path, kChecksumKey, "its data is");
  }
  return result;
}

Metadata read_metadata(const fs::path& path) {
  Header header;
  read_header(path, header);
  return header.metadata;
}

}  // namespace ringlet::checkpoint::safetensors
