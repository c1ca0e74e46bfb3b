// SharedObject: one named POSIX shared-memory object (/dev/shm), mapped read-write. The
// emulated verbs provider keeps its queue pairs, region table and allocations in these.
#pragma once

#include <cstddef>
#include <string>

namespace ringlet::transport::rdma {

class SharedObject {
 public:
  SharedObject() = default;
  // Creates `name` (it must not exist) with `bytes` reserved and zeroed, and maps it. The
  // creator unlinks the name when it is destroyed.
  static SharedObject create(const std::string& name, std::size_t bytes);
  // Maps an existing object, whole; throws core::Error naming it when there is none.
  static SharedObject open(const std::string& name);

  SharedObject(SharedObject&& other) noexcept;
  SharedObject& operator=(SharedObject&& other) noexcept;
  SharedObject(const SharedObject&) = delete;
  SharedObject& operator=(const SharedObject&) = delete;
  ~SharedObject();

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  const std::string& name() const { return name_; }

 private:
  void reset();

  std::string name_;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  bool owner_ = false;
};

}  // namespace ringlet::transport::rdma
