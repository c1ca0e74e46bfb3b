// TorchStore: ringlet's Store over the c10d::Store a torch process group is created with (a
// PrefixStore over torchrun's TCPStore, a FileStore, a HashStore...), so a group's ranks
// rendezvous where torch's do and `env://`, `tcp://` and `file://` all work. Waits poll (see
// wait); one past its deadline is ringlet's TimeoutError naming the keys.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "transport/store.h"

namespace ringlet::torch_backend {

class TorchStore : public transport::Store {
 public:
  explicit TorchStore(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, core::Deadline deadline) override;
  void wait(const std::vector<std::string>& keys, core::Deadline deadline) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  std::string compare_set(const std::string& key, const std::string& expected,
                          const std::string& desired) override;
  bool delete_key(const std::string& key) override;
  std::int64_t num_keys() override;
  void set_timeout(std::chrono::milliseconds timeout) override;

 private:
  c10::intrusive_ptr<c10d::Store> store_;
};

}  // namespace ringlet::torch_backend
