// on_two_threads(): the fit's two ranks as threads of this process.
#pragma once

#include <exception>
#include <functional>
#include <thread>

namespace ringlet::model {

// body(0) and body(1), each on a thread of its own, both joined; then the first error either
// threw (rank 0's first) is rethrown.
inline void on_two_threads(const std::function<void(int rank)>& body) {
  std::exception_ptr errors[2];
  const auto run = [&](int rank) {
    try {
      body(rank);
    } catch (...) {
      errors[rank] = std::current_exception();
    }
  };
  std::thread zero(run, 0), one(run, 1);
  zero.join();
  one.join();
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace ringlet::model
