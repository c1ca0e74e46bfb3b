// Store: the small key-value service ranks rendezvous through (listen addresses, arrival
// counters, barriers). Values are byte strings. Every call that can block takes a deadline,
// and a store whose server is gone fails with a clear error instead of hanging.
// Implementations: TcpStore (a client of TcpStoreServer, hosted by rank 0 or the launcher) and
// FileStore (a file on a shared filesystem, for file:// init).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/deadline.h"

namespace ringlet::transport {

class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, const std::string& value) = 0;
  // Waits until `key` exists, then returns its value (TimeoutError at the deadline).
  virtual std::string get(const std::string& key, core::Deadline deadline) = 0;
  // Waits until every key exists (TimeoutError naming the missing keys at the deadline).
  virtual void wait(const std::vector<std::string>& keys, core::Deadline deadline) = 0;
  // Atomically adds delta to the integer stored at key (absent = 0) and returns the result.
  virtual std::int64_t add(const std::string& key, std::int64_t delta) = 0;
  // Atomically sets key to desired if its value equals expected (an absent key matches an
  // empty expected); returns the value after the operation.
  virtual std::string compare_set(const std::string& key, const std::string& expected,
                                  const std::string& desired) = 0;
  virtual bool delete_key(const std::string& key) = 0;  // true if it existed
  virtual std::int64_t num_keys() = 0;
  // Bounds the non-waiting calls too (a dead server must not hang set/add).
  virtual void set_timeout(std::chrono::milliseconds timeout) = 0;

  // Another client of the same store on a connection of its own, its calls bounded by `timeout`
  // (a thread publishing in the background then never queues behind a rank's blocking get);
  // null when this kind of store cannot make one, or should not be written to steadily (a file
  // store grows with every write: it has no status board).
  virtual std::unique_ptr<Store> another_client(std::chrono::milliseconds timeout) const;
  // Where a program outside the job finds the store (`ringlet status`): "host:port" for a TCP
  // store; empty when there is none to give.
  virtual std::string address() const;
};

// Every one of world_size ranks calls barrier(name) once; returns when all have arrived.
// Names must be unique per use (e.g. "init/3").
void store_barrier(Store& store, const std::string& name, int world_size, core::Deadline deadline);

}  // namespace ringlet::transport
