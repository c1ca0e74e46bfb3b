// FileStore: the Store on one file of a shared filesystem, for file:// init. The file is an
// append-only log of set/delete records after a fixed header; every operation takes flock on
// it (exclusive to write, shared to read), replays the records it has not seen yet, and
// appends. Waits poll with a short sleep until their deadline. Content that does not parse is
// a core::Error naming the file.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "transport/store.h"

namespace ringlet::transport {

class FileStore : public Store {
 public:
  // Opens path, creating it if needed (its directory must exist). If num_workers > 0, the last
  // of that many FileStore objects on this file to be destroyed deletes it, so the next job
  // starts from an empty store; with 0 the file is left for the caller to remove. `timeout`
  // bounds the wait for the file lock of every call.
  explicit FileStore(std::string path, int num_workers = 0,
                     std::chrono::milliseconds timeout = std::chrono::milliseconds(60000));
  ~FileStore() override;
  FileStore(const FileStore&) = delete;
  FileStore& operator=(const FileStore&) = delete;

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, core::Deadline deadline) override;
  void wait(const std::vector<std::string>& keys, core::Deadline deadline) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  std::string compare_set(const std::string& key, const std::string& expected,
                          const std::string& desired) override;
  bool delete_key(const std::string& key) override;
  std::int64_t num_keys() override;
  void set_timeout(std::chrono::milliseconds timeout) override;

  const std::string& path() const { return path_; }

 private:
  class Lock;
  void refresh();  // replays records appended since the last call; needs the lock
  void append_set(const std::string& key, const std::string& value);
  void append_delete(const std::string& key);
  void append(const std::string& record);
  std::int64_t add_locked(const std::string& key, std::int64_t delta);
  // Returns the missing keys (empty when all exist); for get, fills *value.
  std::vector<std::string> poll(const std::vector<std::string>& keys, std::string* value);

  std::string path_;
  int num_workers_;
  std::chrono::milliseconds timeout_;
  int fd_ = -1;
  std::mutex mutex_;  // one thread at a time: flock does not separate threads sharing fd_
  std::map<std::string, std::string> data_;
  std::uint64_t offset_ = 0;  // bytes of the file already replayed into data_
};

}  // namespace ringlet::transport
