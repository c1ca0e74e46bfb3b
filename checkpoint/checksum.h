// The checksum every safetensors file ringlet writes carries: the CRC-32 (zlib's polynomial) of
// each tensor's data bytes, in data order, as 8 hex digits separated by spaces under the
// metadata key kChecksumKey. Per tensor, so that a damaged byte is reported with the tensor and
// the byte range it lies in. Files written elsewhere (PyTorch's safetensors) have none: they
// load with a notice that their data is not verified.
//
// The metadata's values are covered too: under kMetadataChecksumKey, a JSON object that maps
// each other metadata key to the CRC-32 of its value, so that an altered value (an epoch, an lr,
// the config) is refused naming its key, and an added or removed key is named as such.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace ringlet::checkpoint::safetensors {

inline constexpr const char* kChecksumKey = "ringlet_crc32";
inline constexpr const char* kMetadataChecksumKey = "ringlet_metadata_crc32";

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

// The metadata value for `metadata` (every key but the two checksums).
std::string metadata_checksum_text(const std::map<std::string, std::string>& metadata);

// Throws CheckpointError naming the first key whose value does not match its CRC, a key the
// checksum does not cover or one it covers that is missing, or a malformed value.
void verify_metadata_checksums(const std::filesystem::path& path, const std::string& text,
                               const std::map<std::string, std::string>& metadata);

// Prints, once per file and process, that `path` has no checksum to verify (`what`: its data,
// or its metadata's values).
void notice_unverified(const std::filesystem::path& path, const char* key, const char* what);

}  // namespace ringlet::checkpoint::safetensors
