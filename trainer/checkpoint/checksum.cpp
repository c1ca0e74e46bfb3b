#include "trainer/checkpoint/checksum.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <set>
#include <sstream>

#include "trainer/checkpoint/safetensors.h"

namespace ringlet::trainer::safetensors {

namespace {

std::uint32_t crc_of(const TensorBytes& t) {
  uLong crc = ::crc32(0L, Z_NULL, 0);
  const auto* bytes = static_cast<const Bytef*>(t.data);
  // zlib takes a uInt length: feed large tensors in pieces.
  for (std::uint64_t done = 0, total = t.end - t.begin; done < total;) {
    const auto piece = static_cast<uInt>(std::min<std::uint64_t>(total - done, 1u << 30));
    crc = ::crc32(crc, bytes + done, piece);
    done += piece;
  }
  return static_cast<std::uint32_t>(crc);
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

void notice_unverified(const std::filesystem::path& path) {
  static std::mutex mutex;
  static std::set<std::string> told;
  const std::lock_guard<std::mutex> lock(mutex);
  if (!told.insert(path.string()).second) return;
  std::cerr << "notice: " << path.string() << " carries no '" << kChecksumKey
            << "' checksum (written elsewhere, or by ringlet before checksums): its data is "
               "loaded unverified\n";
}

}  // namespace ringlet::trainer::safetensors
