// MemoryStore: an in-process Store for tests that run ranks as threads. One mutex guards the map;
// waiters sleep on a condition variable until a key appears or their deadline passes
// (TimeoutError naming the missing keys), like the real stores.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/error.h"
#include "transport/store.h"

namespace ringlet::testing {

class MemoryStore : public transport::Store {
 public:
  void set(const std::string& key, const std::string& value) override {
    {
      std::lock_guard lock(mutex_);
      values_[key] = value;
    }
    cv_.notify_all();
  }

  std::string get(const std::string& key, core::Deadline deadline) override {
    std::unique_lock lock(mutex_);
    wait_locked(lock, {key}, deadline);
    return values_.at(key);
  }

  void wait(const std::vector<std::string>& keys, core::Deadline deadline) override {
    std::unique_lock lock(mutex_);
    wait_locked(lock, keys, deadline);
  }

  std::int64_t add(const std::string& key, std::int64_t delta) override {
    std::int64_t result = 0;
    {
      std::lock_guard lock(mutex_);
      auto it = values_.find(key);
      const std::int64_t old =
          it == values_.end() ? 0 : core::parse_int(it->second, "memory store key " + key);
      result = old + delta;
      values_[key] = std::to_string(result);
    }
    cv_.notify_all();
    return result;
  }

  std::string compare_set(const std::string& key, const std::string& expected,
                          const std::string& desired) override {
    std::string result;
    {
      std::lock_guard lock(mutex_);
      auto it = values_.find(key);
      const bool matches = it == values_.end() ? expected.empty() : it->second == expected;
      if (matches) values_[key] = desired;
      result = values_[key];
    }
    cv_.notify_all();
    return result;
  }

  bool delete_key(const std::string& key) override {
    std::lock_guard lock(mutex_);
    return values_.erase(key) > 0;
  }

  std::int64_t num_keys() override {
    std::lock_guard lock(mutex_);
    return static_cast<std::int64_t>(values_.size());
  }

  void set_timeout(std::chrono::milliseconds) override {}  // nothing here can block on a server

 private:
  void wait_locked(std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys,
                   core::Deadline deadline) {
    const auto missing = [&] {
      std::string names;
      for (const auto& k : keys) {
        if (values_.count(k) == 0) names += (names.empty() ? "" : ", ") + k;
      }
      return names;
    };
    while (!missing().empty()) {
      if (deadline.at() == core::Deadline::Clock::time_point::max()) {
        cv_.wait(lock);  // wait_until(max) overflows inside libstdc++
      } else if (cv_.wait_until(lock, deadline.at()) == std::cv_status::timeout &&
                 !missing().empty()) {
        RINGLET_THROW(TimeoutError, "memory store: timed out waiting for keys ", missing());
      }
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<std::string, std::string> values_;
};

}  // namespace ringlet::testing
