// The checksum every safetensors file ringlet writes carries: the CRC-32 (zlib's polynomial) of
// each tensor's data bytes, in data order, as 8 hex digits separated by spaces under the
// metadata key kChecksumKey. Per tensor, so that a damaged byte is reported with the tensor and
// the byte range it lies in. Files written elsewhere (PyTorch's safetensors) have none: they
// load with a notice that their data is not verified.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ringlet::trainer::safetensors {

inline constexpr const char* kChecksumKey = "ringlet_crc32";

// A tensor's bytes as the file holds them: its name, where they are (relative to the data
// section) and the bytes themselves.
struct TensorBytes {
  std::string name;
  std::uint64_t begin = 0, end = 0;
  const void* data = nullptr;
};

// The metadata value for `tensors` (in data order).
std::string checksum_text(const std::vector<TensorBytes>& tensors);

// Throws CheckpointError naming the file, the first tensor whose bytes do not match and its
// byte range, or a malformed value (`text` as read from the metadata).
void verify_checksums(const std::filesystem::path& path, const std::string& text,
                      const std::vector<TensorBytes>& tensors);

// Prints, once per file and process, that `path` has no checksum to verify.
void notice_unverified(const std::filesystem::path& path);

}  // namespace ringlet::trainer::safetensors
