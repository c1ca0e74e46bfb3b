// IDX loading: read (and gunzip) each file whole, validate the header against the expected
// magic and the file size before touching the payload, then copy the pixels into one u8
// tensor that every Example views. Sizes are checked with overflow-safe arithmetic so that a
// corrupt header can never make us allocate or read what the file does not hold.
#include "data/idx_dataset.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "core/error.h"

namespace ringlet::data {
namespace {

namespace fs = std::filesystem;

constexpr std::uint32_t kImagesMagic = 0x00000803;  // u8, 3 dims
constexpr std::uint32_t kLabelsMagic = 0x00000801;  // u8, 1 dim

std::string hex32(std::uint32_t value) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", value);
  return buf;
}

std::uint32_t read_be32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}

// Stops a stream that inflates past its limit (see SizeLimit).
class OutputLimit {
 public:
  OutputLimit(const fs::path& path, const SizeLimit& limit) : path_(path), limit_(limit) {
    cap_ = limit.most;
  }
  void check(const std::vector<std::uint8_t>& out) {
    if (!announced_ && limit_.announced && out.size() >= limit_.head_bytes) {
      cap_ = std::min(cap_, limit_.announced(out.data()));
      announced_ = true;
    }
    if (out.size() <= cap_) return;
    throw DataError(
        path_.string() + ": the gzip stream inflates past " + std::to_string(cap_) + " bytes, " +
        (announced_ ? "the size its header announces" : "the most a data file may hold") +
        " (stopped there)");
  }
  std::uint64_t cap() const { return cap_; }

 private:
  const fs::path& path_;
  const SizeLimit& limit_;
  std::uint64_t cap_;
  bool announced_ = false;
};

std::vector<std::uint8_t> gunzip(const fs::path& path, const std::vector<std::uint8_t>& in,
                                 const SizeLimit& limit) {
  // The gzip trailer's ISIZE (size mod 2^32) is only a hint: capped by deflate's maximum
  // ratio (~1032:1) and the limit, so a forged trailer cannot make us reserve gigabytes.
  OutputLimit output_limit(path, limit);
  std::vector<std::uint8_t> out;
  if (in.size() >= 18) {
    const std::uint8_t* t = in.data() + in.size() - 4;
    const std::uint64_t isize = std::uint64_t{t[0]} | (std::uint64_t{t[1]} << 8) |
                                (std::uint64_t{t[2]} << 16) | (std::uint64_t{t[3]} << 24);
    out.reserve(static_cast<std::size_t>(
        std::min<std::uint64_t>({isize, in.size() * 1032ull, output_limit.cap() + 1})));
  }
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 16) != Z_OK) throw DataError(path.string() + ": zlib init failed");
  // Ends the stream however the loop leaves.
  struct End {
    z_stream& zs;
    ~End() { inflateEnd(&zs); }
  } end{zs};
  std::size_t consumed = 0;
  std::uint8_t chunk[1 << 16];
  int ret = Z_OK;
  while (true) {
    if (zs.avail_in == 0 && consumed < in.size()) {
      const std::size_t n = std::min<std::size_t>(in.size() - consumed, 1u << 30);
      zs.next_in = const_cast<Bytef*>(in.data() + consumed);
      zs.avail_in = static_cast<uInt>(n);
      consumed += n;
    }
    zs.next_out = chunk;
    zs.avail_out = sizeof chunk;
    ret = inflate(&zs, Z_NO_FLUSH);
    out.insert(out.end(), chunk, chunk + (sizeof chunk - zs.avail_out));
    output_limit.check(out);
    if (ret == Z_STREAM_END) {
      // gzip allows concatenated members; anything else after the end is corruption.
      if (zs.avail_in == 0 && consumed == in.size()) break;
      if (zs.avail_in >= 2 && zs.next_in[0] == 0x1f && zs.next_in[1] == 0x8b) {
        inflateReset(&zs);
        continue;
      }
      throw DataError(path.string() + ": trailing bytes after the gzip stream");
    }
    if (ret == Z_BUF_ERROR && zs.avail_in == 0 && consumed == in.size()) {
      throw DataError(path.string() + ": truncated gzip stream (" + std::to_string(in.size()) +
                      " compressed bytes end before the stream does)");
    }
    if (ret != Z_OK && ret != Z_BUF_ERROR) {
      const std::string why = zs.msg ? zs.msg : "error " + std::to_string(ret);
      throw DataError(path.string() + ": not a valid gzip stream (zlib: " + why + ")");
    }
  }
  return out;
}

// What an IDX file is, as its type says: a magic number, then `ndims` big-endian u32 sizes.
struct IdxType {
  std::uint32_t magic;
  std::size_t ndims;
  const char* what;  // "u8 images, 3 dims"
  std::size_t header_bytes() const { return 4 + 4 * ndims; }
};

// The dims an IDX header (its first `size` bytes) gives, and the file size they make; the magic
// and the dims are checked, with overflow-safe arithmetic.
std::pair<std::vector<std::int64_t>, std::uint64_t> parse_idx_header(const fs::path& path,
                                                                     const std::uint8_t* bytes,
                                                                     std::size_t size,
                                                                     const IdxType& type) {
  const std::string name = path.string();
  const std::string expect = "expected " + hex32(type.magic) + " (IDX " + type.what + ")";
  if (size < 4) {
    throw DataError(name + ": truncated: " + std::to_string(size) +
                    " bytes, too short for the IDX magic; " + expect);
  }
  const std::uint32_t got = read_be32(bytes);
  if (got != type.magic) {
    throw DataError(name + ": bad magic " + hex32(got) + ", " + expect);
  }
  const std::size_t header = type.header_bytes();
  if (size < header) {
    throw DataError(name + ": truncated header: " + std::to_string(size) +
                    " bytes, expected at least " + std::to_string(header));
  }
  std::vector<std::int64_t> dims(type.ndims);
  std::uint64_t payload = 1;
  for (std::size_t d = 0; d < type.ndims; ++d) {
    dims[d] = read_be32(bytes + 4 + 4 * d);
    if (dims[d] == 0) {
      throw DataError(name + ": dimension " + std::to_string(d) + " is 0, expected > 0" +
                      (d == 0 ? " (the file holds no examples)" : ""));
    }
    if (__builtin_mul_overflow(payload, static_cast<std::uint64_t>(dims[d]), &payload)) {
      throw DataError(name + ": dimensions overflow; " + expect);
    }
  }
  return {dims, header + payload};
}

// Validates an IDX header and the exact file size; returns the dims.
std::vector<std::int64_t> parse_idx(const fs::path& path, const std::vector<std::uint8_t>& bytes,
                                    const IdxType& type) {
  const auto [dims, expected] = parse_idx_header(path, bytes.data(), bytes.size(), type);
  if (bytes.size() != expected) {
    std::string dims_str;
    for (auto d : dims) dims_str += (dims_str.empty() ? "" : " x ") + std::to_string(d);
    throw DataError(path.string() + ": " +
                    (bytes.size() < expected ? "truncated" : "trailing bytes") + ": file holds " +
                    std::to_string(bytes.size()) + " bytes, expected " + std::to_string(expected) +
                    " for dims " + dims_str);
  }
  return dims;
}

// A gzipped IDX file inflates to no more than its header announces.
SizeLimit idx_limit(const fs::path& path, const IdxType& type) {
  SizeLimit limit;
  limit.most = std::uint64_t{1} << 32;
  limit.head_bytes = type.header_bytes();
  limit.announced = [path, type](const std::uint8_t* head) {
    return parse_idx_header(path, head, type.header_bytes(), type).second;
  };
  return limit;
}

// `dir/name.gz`, else `dir/name`; a DataError (with the install hint for the default
// directory) when neither exists.
fs::path find_file(const fs::path& dir, const std::string& name) {
  const fs::path gz = dir / (name + ".gz");
  if (fs::exists(gz)) return gz;
  const fs::path raw = dir / name;
  if (fs::exists(raw)) return raw;
  std::string message = gz.string() + " not found (nor " + raw.string() + ")";
  if (dir.lexically_normal() == fs::path(kDefaultDataDir).lexically_normal()) {
    message +=
        "; Fashion-MNIST is not installed: run `apt-get install dataset-fashion-mnist` "
        "(or scripts/install-deps.sh)";
  }
  throw DataError(message);
}

}  // namespace

std::vector<std::uint8_t> read_data_file(const fs::path& path, const SizeLimit& limit) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    throw DataError(path.string() + ": " +
                    (fs::exists(path, ec) ? "not a regular file" : "not found"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(path.string() + ": cannot open: " + std::strerror(errno));
  const std::uintmax_t size = fs::file_size(path, ec);
  if (ec) throw DataError(path.string() + ": cannot stat: " + ec.message());
  if (size > limit.most) {
    throw DataError(path.string() + ": " + std::to_string(size) + " bytes, more than the " +
                    std::to_string(limit.most) + " a data file of its kind may hold");
  }
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size));
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (in.gcount() != static_cast<std::streamsize>(bytes.size())) {
    throw DataError(path.string() + ": short read (file changed while reading?)");
  }
  if (bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b) return gunzip(path, bytes, limit);
  return bytes;
}

IdxDataset IdxDataset::open(const fs::path& dir, Split split) {
  const std::string prefix = split == Split::train ? "train" : "t10k";
  const fs::path images = find_file(dir, prefix + "-images-idx3-ubyte");
  const fs::path labels = find_file(dir, prefix + "-labels-idx1-ubyte");
  return IdxDataset(images, labels);
}

IdxDataset::IdxDataset(const fs::path& images, const fs::path& labels) {
  const IdxType image_type{kImagesMagic, 3, "u8 images, 3 dims"};
  const IdxType label_type{kLabelsMagic, 1, "u8 labels, 1 dim"};
  const std::vector<std::uint8_t> image_bytes =
      read_data_file(images, idx_limit(images, image_type));
  const auto dims = parse_idx(images, image_bytes, image_type);
  std::vector<std::uint8_t> label_bytes = read_data_file(labels, idx_limit(labels, label_type));
  const auto label_dims = parse_idx(labels, label_bytes, label_type);
  if (label_dims[0] != dims[0]) {
    throw DataError(images.string() + " holds " + std::to_string(dims[0]) + " images but " +
                    labels.string() + " holds " + std::to_string(label_dims[0]) +
                    " labels; expected equal counts");
  }
  count_ = dims[0];
  rows_ = dims[1];
  cols_ = dims[2];
  images_ = tensor::Tensor::empty({count_, 1, rows_, cols_}, core::DType::u8);
  if (images_.nbytes() > 0)
    std::memcpy(images_.raw_data(), image_bytes.data() + 16, images_.nbytes());
  labels_.assign(label_bytes.begin() + 8, label_bytes.end());
  labels_path_ = labels;
}

void IdxDataset::check_labels(std::int64_t classes, const std::string& dataset) const {
  for (std::size_t i = 0; i < labels_.size(); ++i) {
    if (labels_[i] < classes) continue;
    throw DataError(core::str(labels_path_.string(), ": example ", i, " has label ",
                              static_cast<int>(labels_[i]), ", outside ", dataset, "'s ", classes,
                              " classes (0..", classes - 1, ")"));
  }
}

Example IdxDataset::get(std::int64_t index) const {
  RINGLET_CHECK(index >= 0 && index < count_, ValueError, "IdxDataset::get(", index,
                "): index out of range for ", count_, " examples");
  const std::int64_t plane = rows_ * cols_;
  return {tensor::Tensor::make_view(images_.storage(), {1, rows_, cols_}, {plane, cols_, 1},
                                    images_.offset() + index * plane, core::DType::u8),
          labels_[static_cast<std::size_t>(index)]};
}

}  // namespace ringlet::data
