// Files that a crash cannot tear: a whole file replaced atomically (temporary file in the same
// directory, fsync, rename, fsync of the directory), and a line appended whole (one write to a
// file opened for appending, then fsync). Errors are core::Error naming the file and errno.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace ringlet::core {

// After a crash `path` holds either its old bytes or `bytes`, never a mix.
void write_file_atomically(const std::filesystem::path& path, const std::string& bytes);
// Appends `line` and a newline in one write; concurrent appenders never interleave inside a line.
void append_line(const std::filesystem::path& path, const std::string& line);
// The whole file ("" when it does not exist).
std::string read_file_text(const std::filesystem::path& path);

// The temporary file an atomic writer writes `path` through: DIR/.NAME.tmp.PID.N, unique among
// this process's threads and all processes.
std::filesystem::path temporary_path(const std::filesystem::path& path);
// Deletes the temporaries (as temporary_path names them) in `dir`, which only a writer that
// died mid-write leaves, and returns their names. Only for a directory no live process writes
// in, e.g. a run directory whose lock the caller holds.
std::vector<std::string> remove_temporaries(const std::filesystem::path& dir);

}  // namespace ringlet::core
