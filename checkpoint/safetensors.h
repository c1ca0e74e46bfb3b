// The safetensors file format (as read by Hugging Face's loader and by PyTorch through it):
// an 8-byte little-endian header length N, N bytes of JSON
//   {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"key": "value", ...}}
// padded with spaces to a multiple of 8, then the tensors' raw little-endian bytes, which the
// offsets (relative to the end of the header) must cover exactly, without gaps or overlaps.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "tensor/tensor.h"

namespace ringlet::checkpoint {

// An unreadable, corrupt or inconsistent checkpoint; the message names the file (and the
// tensor, where one is at fault).
class CheckpointError : public core::Error {
 public:
  using core::Error::Error;
};

namespace safetensors {

using NamedTensors = std::vector<std::pair<std::string, tensor::Tensor>>;
using Metadata = std::map<std::string, std::string>;

struct File {
  NamedTensors tensors;  // in the order of their data in the file (= the order written)
  Metadata metadata;     // as written (the checksum is the format's, not part of it)
  // The tensor called `name`; CheckpointError naming the file's tensors when absent.
  const tensor::Tensor& at(const std::string& name) const;
};

// Writes `tensors` (any device and layout; copied to contiguous CPU bytes) in the given order,
// with `metadata` and the tensors' checksums (checksum.h) as "__metadata__". Atomic: the bytes go
// to a temporary file in the same directory, which is fsynced and renamed over `path`, and the
// directory is fsynced, so a crash leaves either the old file or the new one, never a torn one.
// Names must be unique, non-empty and not "__metadata__".
void write(const std::filesystem::path& path, const NamedTensors& tensors,
           const Metadata& metadata = {});

// Reads and validates a whole file: header length against the file size (before allocating
// anything), JSON syntax, duplicate names, dtype names, shapes, offsets against shape x dtype
// size, full coverage of the data without gaps or overlaps, and each tensor's checksum where
// the file has them (a notice on stderr where it has none). Tensors come back on the CPU.
File read(const std::filesystem::path& path);
// The metadata alone: the header is read and checked as read() checks it, the tensors are not.
Metadata read_metadata(const std::filesystem::path& path);

// "F32", "BF16", ... as the format spells ringlet's dtypes.
const char* dtype_to_name(core::DType dtype);

}  // namespace safetensors
}  // namespace ringlet::checkpoint
