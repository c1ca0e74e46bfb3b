// TorchStore: see torch_store.h.
#include "torch_store.h"

#include <algorithm>
#include <thread>

#include "core/error.h"

namespace ringlet::torch_backend {
namespace {

std::vector<std::uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }
std::string string_of(const std::vector<std::uint8_t>& b) { return {b.begin(), b.end()}; }

}  // namespace

void TorchStore::set(const std::string& key, const std::string& value) {
  store_->set(key, bytes_of(value));
}

std::string TorchStore::get(const std::string& key, core::Deadline deadline) {
  wait({key}, deadline);
  return string_of(store_->get(key));
}

// Polled with check(), never with c10d's timed wait: a TCPStore wait that times out leaves its
// answer on the socket, where the next request would read it.
void TorchStore::wait(const std::vector<std::string>& keys, core::Deadline deadline) {
  auto pause = std::chrono::microseconds(200);
  while (!store_->check(keys)) {
    if (deadline.expired()) {
      std::string names;
      for (const auto& k : keys) names += (names.empty() ? "" : ", ") + k;
      RINGLET_THROW(TimeoutError, "torch store: ", names, " not set in time");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(20000));
  }
}

std::int64_t TorchStore::add(const std::string& key, std::int64_t delta) {
  return store_->add(key, delta);
}

std::string TorchStore::compare_set(const std::string& key, const std::string& expected,
                                    const std::string& desired) {
  return string_of(store_->compareSet(key, bytes_of(expected), bytes_of(desired)));
}

bool TorchStore::delete_key(const std::string& key) { return store_->deleteKey(key); }

std::int64_t TorchStore::num_keys() { return store_->getNumKeys(); }

void TorchStore::set_timeout(std::chrono::milliseconds timeout) { store_->setTimeout(timeout); }

}  // namespace ringlet::torch_backend
