#include "checkpoint/checksum.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "checkpoint/safetensors.h"

namespace ringlet::checkpoint::safetensors {

namespace {

std::uint32_t crc_of(const void* data, std::uint64_t total) {
  uLong crc = ::crc32(0L, Z_NULL, 0);
  const auto* bytes = static_cast<const Bytef*>(data);
  // zlib takes a uInt length: feed large tensors in pieces.
  for (std::uint64_t done = 0; done < total;) {
    const auto piece = static_cast<uInt>(std::min<std::uint64_t>(total - done, 1u << 30));
    crc = ::crc32(crc, bytes + done, piece);
    done += piece;
  }
  return static_cast<std::uint32_t>(crc);
}

std::uint32_t crc_of(const TensorBytes& t) { return crc_of(t.data, t.end - t.begin); }

std::uint32_t crc_of(const std::string& text) { return crc_of(text.data(), text.size()); }

bool is_checksum_key(const std::string& key) {
  return key == kChecksumKey || key == kMetadataChecksumKey;
}

std::string hex(std::uint32_t value) {
  char text[9];
  std::snprintf(text, sizeof text, "%08x", value);
  return text;
}

// The stored words; CheckpointError when they are not 8 hex digits each, one per tensor.
std::vector<std::uint32_t> parse_words(const std::filesystem::path& path, const std::string& text,
                                       std::size_t tensors) {
  std::vector<std::uint32_t> words;
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    const bool hex_word = word.size() == 8 && std::all_of(word.begin(), word.end(), [](char c) {
                            return std::isxdigit(static_cast<unsigned char>(c)) != 0;
                          });
    if (!hex_word) {
      throw CheckpointError(path.string() + ": metadata '" + kChecksumKey + "' holds '" + word +
                            "', not an 8-digit hex CRC-32");
    }
    words.push_back(static_cast<std::uint32_t>(std::stoul(word, nullptr, 16)));
  }
  if (words.size() != tensors) {
    throw CheckpointError(path.string() + ": metadata '" + kChecksumKey + "' has " +
                          std::to_string(words.size()) + " checksums for " +
                          std::to_string(tensors) + " tensors");
  }
  return words;
}

}  // namespace

std::string checksum_text(const std::vector<TensorBytes>& tensors) {
  std::string text;
  for (const TensorBytes& t : tensors) text += (text.empty() ? "" : " ") + hex(crc_of(t));
  return text;
}

void verify_checksums(const std::filesystem::path& path, const std::string& text,
                      const std::vector<TensorBytes>& tensors) {
  const std::vector<std::uint32_t> stored = parse_words(path, text, tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const TensorBytes& t = tensors[i];
    const std::uint32_t computed = crc_of(t);
    if (computed == stored[i]) continue;
    throw CheckpointError(path.string() + ": tensor '" + t.name + "' (data bytes [" +
                          std::to_string(t.begin) + ", " + std::to_string(t.end) +
                          ")) fails its CRC-32 check (stored " + hex(stored[i]) + ", computed " +
                          hex(computed) + "): the file is damaged");
  }
}

std::string metadata_checksum_text(const std::map<std::string, std::string>& metadata) {
  nlohmann::json crcs = nlohmann::json::object();
  for (const auto& [key, value] : metadata) {
    if (!is_checksum_key(key)) crcs[key] = hex(crc_of(value));
  }
  return crcs.dump();
}

void verify_metadata_checksums(const std::filesystem::path& path, const std::string& text,
                               const std::map<std::string, std::string>& metadata) {
  const std::string where = path.string() + ": metadata '" + kMetadataChecksumKey + "'";
  nlohmann::json crcs;
  try {
    crcs = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    throw CheckpointError(where + " is not a JSON object of CRC-32s");
  }
  if (!crcs.is_object()) throw CheckpointError(where + " is not a JSON object of CRC-32s");
  for (const auto& [key, value] : metadata) {
    if (is_checksum_key(key)) continue;
    const auto crc = crcs.find(key);
    if (crc == crcs.end()) {
      throw CheckpointError(path.string() + ": metadata '" + key +
                            "' is not covered by the file's checksum (added after it was written)");
    }
    if (!crc->is_string() || crc->get<std::string>() != hex(crc_of(value))) {
      throw CheckpointError(path.string() + ": metadata '" + key +
                            "' fails its CRC-32 check (its value was altered or damaged): '" +
                            value.substr(0, 80) + (value.size() > 80 ? "...'" : "'"));
    }
  }
  for (const auto& [key, crc] : crcs.items()) {
    if (metadata.count(key) == 0) {
      throw CheckpointError(path.string() + ": metadata '" + key +
                            "' is missing (the file's checksum covers it)");
    }
  }
}

void notice_unverified(const std::filesystem::path& path, const char* key, const char* what) {
  static std::mutex mutex;
  static std::set<std::string> told;
  const std::lock_guard<std::mutex> lock(mutex);
  if (!told.insert(path.string() + "\n" + key).second) return;
  std::cerr << "notice: " << path.string() << " carries no '" << key
            << "' checksum (written elsewhere, or by an older ringlet): " << what
            << " loaded unverified\n";
}

}  // namespace ringlet::checkpoint::safetensors
